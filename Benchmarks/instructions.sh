#!/usr/bin/env bash
# instructions.sh [--readme] [--no-load] [--check]
#
# The figures of issue 12, each beside its baseline from the same run, as one markdown table:
#
# - Instructions and mallocs per iteration (valgrind --tool=callgrind: deterministic on this shared machine, where
#   wall times are not), with a wall time per iteration beside them (not under valgrind: the median of 5 runs):
#     callback runner, fail twice then succeed, zero delay   vs the hand-written recursive requestWithRetry
#     withRetry around an operation that calls back at once vs a bare withCheckedThrowingContinuation
#     async retry, success at once                           vs calling the operation directly
#     async retry, fail twice then succeed, .none            vs the seed library's documented loop (SeedStyleRetry)
#   The workloads are in Sources/Workloads (run by `instr-workloads WORKLOAD N`). Each is measured with N and 2N
#   iterations; per iteration = (Ir(2N) - Ir(N)) / N, so start-up and one-time costs cancel out. The rows that run in a
#   task (withRetry, continuation, the async rows) use N = INSTR_ASYNC_N instead: their runs differ by up to ~15,000 Ir
#   from one another (the cooperative pool's threads park and wake with the timing of the machine), which is up to 10%
#   of an async row at N = 200 and under 1% at N = 2000, and such a run takes under a second either way. Mallocs are the
#   calls of malloc, calloc, realloc, posix_memalign, aligned_alloc and memalign that callgrind counted, the same
#   difference. glibc is pinned to one malloc arena (otherwise `free` costs vary with thread timing).
# - Unless --no-load: memory per waiting retrier (runner-load memory, 100,000 waiting on a 60 s backoff) and prompt
#   cancellation (runner-load cancel: 1,000 waits on a 60 s backoff cancelled while a CPU-bound child process keeps
#   every core busy; cancel -> completion, median and worst).
#
# --readme splices the table into README.md between <!-- instructions:begin --> and <!-- instructions:end -->.
# --check fails (exit 1) if a RetryKit workload counts more instructions per iteration than its limit in
# instruction-limits.txt (CI runs `INSTR_N=200 INSTR_RUNS=3 ./instructions.sh --no-load --check`: ~1 min; the callback
# rows' N = 200 counts are within ~4% of N = 2000, the rows in a task are measured at INSTR_ASYNC_N = 2000).
#
# Environment: INSTR_N (default 2000), INSTR_ASYNC_N (N of the rows that run in a task; default the larger of INSTR_N
# and 2000, INSTR_N with INSTR_SMOKE), INSTR_RUNS (callgrind runs per (workload, N), least taken; default 3, 1 with INSTR_SMOKE),
# INSTR_TIMEOUT (seconds per valgrind run, default 300), INSTR_MEMORY_COUNT (default 100000),
# INSTR_CANCEL_COUNT (default 1000), INSTR_RECOVERY_COUNT (retriers waiting on one refresh, default 10000), INSTR_NO_BUILD=1 (use the release build as it is), INSTR_SMOKE=1 (CI smoke: N=20, memory 2,000, cancel 100; checks that everything
# runs and produces figures, prints the table, no targets enforced).
# Exit: 0 measured (whether or not targets are met); 1 build failed, or --check found a count over its limit; 2 usage;
# 3 valgrind failed or a workload did not do the expected work.
set -uo pipefail
cd "$(dirname "$0")"

readme=0
load=1
check=0
for argument in "$@"; do
    case $argument in
    --readme) readme=1 ;;
    --no-load) load=0 ;;
    --check) check=1 ;;
    *) echo "usage: $0 [--readme] [--no-load] [--check]" >&2; exit 2 ;;
    esac
done
if [ "${INSTR_SMOKE:-0}" = 1 ]; then
    n=${INSTR_N:-20} memory_count=${INSTR_MEMORY_COUNT:-2000} cancel_count=${INSTR_CANCEL_COUNT:-100} recovery_count=${INSTR_RECOVERY_COUNT:-500}
else
    n=${INSTR_N:-2000} memory_count=${INSTR_MEMORY_COUNT:-100000} cancel_count=${INSTR_CANCEL_COUNT:-1000} recovery_count=${INSTR_RECOVERY_COUNT:-10000}
fi
runs=${INSTR_RUNS:-$([ "${INSTR_SMOKE:-0}" = 1 ] && echo 1 || echo 3)}
limit=${INSTR_TIMEOUT:-300}
async_n=${INSTR_ASYNC_N:-$([ "${INSTR_SMOKE:-0}" = 1 ] || [ "$n" -ge 2000 ] 2>/dev/null && echo "$n" || echo 2000)}
for value in "$n" "$async_n" "$runs" "$limit" "$memory_count" "$cancel_count"; do
    [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "INSTR_* values must be positive integers (got $value)" >&2; exit 2; }
done
work=.build/instructions
mkdir -p "$work"
die() { local code=$1; shift; echo "instructions.sh: $*" >&2; exit "$code"; }
loadavg() { cut -d " " -f 1-3 /proc/loadavg 2>/dev/null || echo unknown; }

if [ "${INSTR_NO_BUILD:-0}" != 1 ]; then
    echo "== build (release): instr-workloads, runner-load" >&2
    swift build -c release --product instr-workloads >&2 || die 1 "build failed"
    if [ "$load" = 1 ]; then swift build -c release --product runner-load >&2 || die 1 "build failed"; fi
fi
bin=.build/release/instr-workloads

if ! command -v valgrind >/dev/null 2>&1; then
    echo "== installing valgrind" >&2
    { apt-get update -qq && apt-get install -y -qq valgrind; } >"$work/apt.log" 2>&1 \
        || die 3 "valgrind is missing and could not be installed (see $work/apt.log)"
fi

# Total Ir of a callgrind output file.
total_ir() {
    awk '/^totals:/ { t = $2 } /^summary:/ { s = $2 } END { if (t != "") print t; else if (s != "") print s }' "$1"
}

# Calls of the C allocator's allocating functions, summed over every caller outside the allocator, from a callgrind
# output file (names are compressed as "(id) name" on first use, "(id)" afterwards).
malloc_calls() {
    awk '
        function name(field,   id, rest) {
            if (match(field, /^\([0-9]+\)/)) {
                id = substr(field, 2, RLENGTH - 2); rest = substr(field, RLENGTH + 1); sub(/^ /, "", rest)
                if (rest != "") names[id] = rest
                return names[id]
            }
            return field
        }
        BEGIN { split("malloc calloc realloc posix_memalign aligned_alloc memalign", list, " "); for (i in list) want[list[i]] = 1 }
        /^fn=/ { caller = name(substr($0, 4)); next }
        /^cfn=/ { callee = name(substr($0, 5)); next }
        # Calls from inside the allocator (posix_memalign -> _mid_memalign -> malloc) are not counted again.
        /^calls=/ {
            split(substr($0, 7), a, " ")
            if ((callee in want) && !(caller in want) && caller !~ /^(_mid_memalign|_int_|__libc_)/) total += a[1]
            next
        }
        END { print total + 0 }' "$1"
}

# measure WORKLOAD COUNT: the least Ir of $runs callgrind runs; sets IR and MALLOCS (of that run).
measure() {
    local workload=$1 count=$2 run file ir status
    IR= MALLOCS=
    for ((run = 1; run <= runs; run++)); do
        file="$work/callgrind.$workload.$count.$run.out"
        rm -f "$file"
        GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.arena_max=1 \
            timeout --kill-after=10 "$limit" valgrind --tool=callgrind --callgrind-out-file="$file" \
            "$bin" "$workload" "$count" >"$work/$workload.stdout" 2>"$work/callgrind.$workload.log"
        status=$?
        case $status in
        0) ;;
        3) die 3 "$workload did not do the expected work: $(tail -1 "$work/$workload.stdout")" ;;
        124 | 137) die 3 "$workload did not finish within $limit s under callgrind (a hang?)" ;;
        *) die 3 "callgrind failed for $workload (exit $status): $(tail -3 "$work/callgrind.$workload.log" | tr '\n' ' ')" ;;
        esac
        ir=$(total_ir "$file")
        [ -n "$ir" ] || die 3 "no totals in $file"
        if [ -z "$IR" ] || ((ir < IR)); then IR=$ir MALLOCS=$(malloc_calls "$file"); fi
    done
}

declare -A IR_PER MALLOC_PER NS_PER
per_iteration() {  # per_iteration WORKLOAD
    local workload=$1 ir1 m1 n=$n
    case $workload in callback-*) ;; *) n=$async_n ;; esac  # the rows that run in a task (see the top)
    measure "$workload" "$n"; ir1=$IR m1=$MALLOCS
    measure "$workload" $((2 * n))
    IR_PER[$workload]=$(awk -v a="$IR" -v b="$ir1" -v n="$n" 'BEGIN { printf "%.0f", (a - b) / n }')
    MALLOC_PER[$workload]=$(awk -v a="$MALLOCS" -v b="$m1" -v n="$n" 'BEGIN { printf "%.2f", (a - b) / n }')
    # Wall time, natively: enough iterations for a few milliseconds per timed run.
    NS_PER[$workload]=$("$bin" "$workload" $((n < 1000 ? n : 20 * n)) time | sed -nE 's/.*median_ns=([0-9]+).*/\1/p')
    echo "   $workload: ${IR_PER[$workload]} Ir, ${MALLOC_PER[$workload]} mallocs, ${NS_PER[$workload]} ns per iteration" >&2
}

machine="$(uname -sm), $(nproc) cores, $(swift --version 2>/dev/null | head -n 1)"
load_before=$(loadavg)
start=$SECONDS
echo "== callgrind: N=$n and $((2 * n)) iterations per callback workload, $async_n and $((2 * async_n)) per workload in a task, $runs run(s) each" >&2
for workload in callback-retrykit callback-hand withretry continuation async-success direct-success \
    async-fail-twice seed-fail-twice callback-recovering callback-plan; do
    per_iteration "$workload"
done
callgrind_seconds=$((SECONDS - start))

# Formatting helpers.
thousands() { awk -v x="$1" 'BEGIN { s = sprintf("%.0f", x); r = ""; while (length(s) > 3) { r = "," substr(s, length(s) - 2) r; s = substr(s, 1, length(s) - 3) } print s r }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f×", a / b; else print "n/a" }'; }
cell() {  # cell WORKLOAD: "Ir (mallocs, ns)"
    echo "$(thousands "${IR_PER[$1]}") Ir, ${MALLOC_PER[$1]} mallocs, ${NS_PER[$1]:-?} ns"
}
met() {  # met CONDITION-AWK-EXPRESSION with a and b (and ma, mb) bound
    awk -v a="$1" -v b="$2" -v ma="$3" -v mb="$4" "BEGIN { exit !($5) }" && echo yes || echo "**no**"
}

cb=callback-retrykit hand=callback-hand
rows=()
rows+=("| callback runner: fails twice then succeeds, zero delay, one serial queue (per retrier) | $(cell $cb) | $(cell $hand) (hand-written recursive \`requestWithRetry\`) | $(ratio "${IR_PER[$cb]}" "${IR_PER[$hand]}") | ≤ 2.5× and ≤ +1 malloc (same hops) | $(met "${IR_PER[$cb]}" "${IR_PER[$hand]}" "${MALLOC_PER[$cb]}" "${MALLOC_PER[$hand]}" 'a <= 2.5 * b && ma <= mb + 1.005') |")
rows+=("| \`withRetry\` around an operation that calls back at once | $(cell withretry) | $(cell continuation) (bare \`withCheckedThrowingContinuation\`) | $(ratio "${IR_PER[withretry]}" "${IR_PER[continuation]}") | ≤ 2× | $(met "${IR_PER[withretry]}" "${IR_PER[continuation]}" 0 0 'a <= 2 * b') |")
rows+=("| async \`retry\`, success on the first try | $(cell async-success) | $(cell direct-success) (the operation called directly) | +$(thousands "$(awk -v a="${IR_PER[async-success]}" -v b="${IR_PER[direct-success]}" 'BEGIN { print a - b }')") Ir | ≤ 100 ns over the direct call (wall) | $(met "${NS_PER[async-success]:-0}" "${NS_PER[direct-success]:-0}" 0 0 'a - b <= 100') |")
rows+=("| a plan's callback run with a \`RetryRecovery\` it never needs, fails twice then succeeds, zero delay | $(cell callback-recovering) | $(cell callback-plan) (the same plan without a recovery) | $(ratio "${IR_PER[callback-recovering]}" "${IR_PER[callback-plan]}") | reported (issue 25) | |")
rows+=("| async \`retry\`, fails twice then succeeds, \`.none\` | $(cell async-fail-twice) | $(cell seed-fail-twice) (the seed library's loop, rewritten) | $(ratio "${IR_PER[async-fail-twice]}" "${IR_PER[seed-fail-twice]}") | ≤ 0.3× | $(met "${IR_PER[async-fail-twice]}" "${IR_PER[seed-fail-twice]}" 0 0 'a <= 0.3 * b') |")

if [ "$load" = 1 ]; then
    start=$SECONDS
    runner=.build/release/runner-load
    field() { sed -nE "s/(^|.* )$1=([^ ]+).*/\2/p" <<<"$2"; }
    declare -A MEMORY CANCEL CANCEL_MAX
    for kind in callback timer async task-sleep; do
        echo "== runner-load memory $kind $memory_count" >&2
        line=$("$runner" memory "$kind" "$memory_count") || die 3 "runner-load memory $kind failed: $line"
        echo "   $line" >&2
        MEMORY[$kind]=$(field bytes_per_item "$line")
    done
    for kind in async task-sleep callback timer; do
        echo "== runner-load cancel $kind $cancel_count" >&2
        line=$("$runner" cancel "$kind" "$cancel_count") || die 3 "runner-load cancel $kind failed: $line"
        echo "   $line" >&2
        CANCEL[$kind]="median $(field p50_ms "$line") ms, worst $(field max_ms "$line") ms (load $(field loadavg_1m "$line"))"
        CANCEL_MAX[$kind]=$(field max_ms "$line")
    done
    rows+=("| memory per waiting callback retrier ($(thousands "$memory_count") on a 60 s backoff; VmRSS delta / count) | $(thousands "${MEMORY[callback]}") B | $(thousands "${MEMORY[timer]}") B (an armed \`DispatchSourceTimer\`) | $(ratio "${MEMORY[callback]}" "${MEMORY[timer]}") | ≤ 1,280 B | $(met "${MEMORY[callback]}" 0 0 0 'a <= 1280') |")
    rows+=("| memory per waiting async retrier ($(thousands "$memory_count") tasks in \`retry\`, 60 s backoff) | $(thousands "${MEMORY[async]}") B | $(thousands "${MEMORY[task-sleep]}") B (a task in \`Task.sleep\`) | $(ratio "${MEMORY[async]}" "${MEMORY[task-sleep]}") | ≤ 2,560 B | $(met "${MEMORY[async]}" 0 0 0 'a <= 2560') |")
    rows+=("| cancel → completion, $(thousands "$cancel_count") async retriers on a 60 s backoff, every core busy | ${CANCEL[async]} | ${CANCEL[task-sleep]} (tasks in \`Task.sleep\`) | | worst ≤ 50 ms | $(met "${CANCEL_MAX[async]}" 0 0 0 'a <= 50') |")
    rows+=("| cancel → completion, $(thousands "$cancel_count") callback retriers on a 60 s backoff, every core busy | ${CANCEL[callback]} | ${CANCEL[timer]} (one-shot \`DispatchSourceTimer\`s, cancel handler) | | worst ≤ 50 ms (as async) | $(met "${CANCEL_MAX[callback]}" 0 0 0 'a <= 50') |")
    declare -A RECOVERY_BYTES RECOVERY_LAST
    for kind in callback async; do
        echo "== runner-load recovery $kind $recovery_count" >&2
        line=$("$runner" recovery "$kind" "$recovery_count") || die 3 "runner-load recovery $kind failed: $line"
        echo "   $line" >&2
        [ "$(field refreshes "$line")" = 1 ] || die 3 "runner-load recovery $kind: not one refresh: $line"
        RECOVERY_BYTES[$kind]=$(field bytes_per_item "$line")
        RECOVERY_LAST[$kind]="$(field last_retry_ms "$line") ms (load $(field loadavg_1m "$line"))"
    done
    rows+=("| $(thousands "$recovery_count") callback retriers waiting on one refresh (\`RecoveringRetryPlan.execute(on:)\`): memory per waiting retrier; refresh's end → last retry's start | $(thousands "${RECOVERY_BYTES[callback]}") B; ${RECOVERY_LAST[callback]} | $(thousands "${MEMORY[callback]}") B (a callback retrier waiting on a backoff timer) | $(ratio "${RECOVERY_BYTES[callback]}" "${MEMORY[callback]}") | reported (issue 25) | |")
    rows+=("| $(thousands "$recovery_count") async retriers waiting on one refresh (\`try await plan.execute { token, attempt in … }\`): memory per waiting retrier; refresh's end → last retry's start | $(thousands "${RECOVERY_BYTES[async]}") B; ${RECOVERY_LAST[async]} | $(thousands "${MEMORY[async]}") B (an async retrier waiting on a backoff) | $(ratio "${RECOVERY_BYTES[async]}" "${MEMORY[async]}") | reported (issue 25) | |")
    load_seconds=$((SECONDS - start))
fi

report="$work/report.md"
{
    echo "Machine: $machine. Load average before: $load_before; after: $(loadavg). Callgrind: N = $n and $((2 * n)) iterations (callback rows), $async_n and $((2 * async_n)) (rows in a task), $runs run(s) each, ${callgrind_seconds} s$([ "$load" = 1 ] && echo "; memory and cancellation figures ${load_seconds} s")."
    echo
    echo "| figure | RetryKit | baseline | ratio | target | met? |"
    echo "| --- | --- | --- | ---: | --- | --- |"
    printf '%s\n' "${rows[@]}"
    echo
    echo "Reproduce: \`cd Benchmarks && ./instructions.sh\` (add \`--readme\` to write this table into README.md)."
} >"$report"
cat "$report"

if [ "$readme" = 1 ]; then
    awk -v report="$report" -v begin="<!-- instructions:begin -->" -v end="<!-- instructions:end -->" '
        $0 == begin { print; while ((getline line < report) > 0) print line; skipping = 1; found = 1; next }
        $0 == end { skipping = 0 }
        !skipping { print }
        END { if (!found) exit 1 }
    ' README.md >README.md.tmp && mv README.md.tmp README.md || { rm -f README.md.tmp; die 3 "no instructions markers in README.md"; }
    echo "== wrote the table into README.md" >&2
fi

if [ "$check" = 1 ]; then
    over=0
    while read -r workload limit; do
        case $workload in '' | '#'*) continue ;; esac
        figure=${IR_PER[$workload]:-}
        [ -n "$figure" ] || die 3 "instruction-limits.txt names an unknown workload: $workload"
        if ((figure > limit)); then
            echo "instructions: REGRESSION: $workload counts $figure Ir per iteration, limit $limit (instruction-limits.txt)"
            over=1
        elif ((figure * 115 < limit * 100)); then
            echo "instructions: $workload: $figure Ir, limit $limit: more than 15% under it, lower the limit"
        else
            echo "instructions: $workload: $figure Ir, limit $limit: ok"
        fi
    done <instruction-limits.txt
    [ "$over" = 0 ] || exit 1
fi
