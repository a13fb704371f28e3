#!/usr/bin/env bash
# smoke.sh: one short pass of every benchmark, so that none of them can rot (CI runs it after building this package
# in release). Not a timing gate: it fails only if something does not build, crashes, hangs or reports an error.
#
# - the harness benchmarks (`swift package benchmark`, every target) with RETRYKIT_BENCH_SMOKE=1: 20 ms / 2 samples
#   each;
# - runner-load: every figure and kind, with small counts;
# - instr-workloads: every workload, natively (instructions.sh's callgrind runs need valgrind; with it installed, a
#   short callgrind pass of each workload too);
# - jitter-sim: 2 runs, 10 clients;
# - TestKit: one run of 1,000 scheduler items and one of 100 clock sleepers.
set -euo pipefail
cd "$(dirname "$0")"
step() { printf -- '-- %s (%ss)\n' "$1" "$SECONDS"; }

swift build -c release >/dev/null

step "harness benchmarks, one short pass (RETRYKIT_BENCH_SMOKE=1)"
RETRYKIT_BENCH_SMOKE=1 swift package benchmark --no-progress --quiet

step "runner-load, every figure, small counts"
runner=.build/release/runner-load
for kind in callback timer async task-sleep; do "$runner" memory "$kind" 2000; done
for kind in callback dispatch async task-sleep; do "$runner" timers "$kind" 200; done
for kind in callback hand-written; do "$runner" scale "$kind" 1000; done
for kind in async task-sleep callback timer; do "$runner" cancel "$kind" 100; done

step "instr-workloads, every workload"
for workload in $(.build/release/instr-workloads 2>/dev/null | sed -nE 's/^usage: instr-workloads ([^ ]+) N.*/\1/p' | tr '|' ' '); do
    .build/release/instr-workloads "$workload" 20
done
if command -v valgrind >/dev/null 2>&1; then
    step "instructions.sh, short callgrind pass (INSTR_SMOKE=1, --no-load)"
    INSTR_SMOKE=1 INSTR_NO_BUILD=1 ./instructions.sh --no-load >/dev/null
else
    step "instructions.sh skipped: valgrind is not installed"
fi

step "jitter-sim, 2 runs"
.build/release/jitter-sim --runs 2 --clients 10 >/dev/null

step "TestKit, 1 small run each"
.build/release/TestKit scheduler 1000 1
.build/release/TestKit clock 100 1

step "smoke passed"
