#!/usr/bin/env bash
# Runs every RetryKit benchmark, the runner load figures and the jitter simulation, release builds, and writes:
#   results/benchmarks.md         the benchmark harness's report (all targets in Benchmarks/: BackoffCore, Runners)
#   results/load.txt              runner-load's figures: memory per waiting retrier, timer lateness, scale
#   results/runners.md            the runner table (bench-report, from the two files above)
#   results/backoff.md            the backoff-core table (bench-report, from results/benchmarks.md)
#   results/jitter-simulation.md  the jitter simulation's report
# and splices the three tables into README.md between their markers.
#
# Usage: ./run.sh   (from anywhere; about 2 min warm on the 2-core reference machine, plus the builds when cold)
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p results

machine="$(uname -sm), $(nproc) cores, $(swift --version 2>/dev/null | head -n 1)"
load() { cut -d " " -f 1-3 /proc/loadavg 2>/dev/null || echo "unknown"; }

echo "== build (release)" >&2
swift build -c release >&2

echo "== benchmarks (swift package benchmark)" >&2
{
    echo "Machine: $machine; load average before the run: $(load)"
    echo
    # Drop the harness's colour codes and its note about the ARC runtime interposer (not used: ARC metrics are off).
    swift package benchmark --no-progress --format markdown \
        | sed -e 's/\x1b\[[0-9;]*m//g' | grep -v -e '^Warning: running with the Swift runtime' -e '^Note: skipping LD_PRELOAD'
} > results/benchmarks.md

echo "== runner load figures (runner-load, one process each)" >&2
{
    echo "# Machine: $machine; load average before the run: $(load)"
    for kind in callback timer async task-sleep; do .build/release/runner-load memory "$kind" 100000; done
    # Lateness and scale vary from run to run with whatever else the machine does: three runs each, interleaved with
    # their baselines; bench-report takes the median.
    for run in 1 2 3; do
        for kind in callback dispatch async task-sleep; do .build/release/runner-load timers "$kind" 2000; done
        for count in 1000 10000 100000; do
            for kind in callback hand-written; do .build/release/runner-load scale "$kind" "$count"; done
        done
    done
    echo "# load average after the run: $(load)"
} > results/load.txt

echo "== runner table (bench-report)" >&2
{
    echo "Machine: $machine. Load average: before the harness $(sed -n '1s/.*load average before the run: //p' results/benchmarks.md), after the load figures $(sed -n 's/^# load average after the run: //p' results/load.txt)."
    echo
    .build/release/bench-report runners results/benchmarks.md results/load.txt
} > results/runners.md
.build/release/bench-report backoff results/benchmarks.md > results/backoff.md

echo "== jitter simulation (jitter-sim)" >&2
{
    echo "Machine: $machine"
    echo
    .build/release/jitter-sim
} > results/jitter-simulation.md

# Replace everything between a pair of markers in README.md with a fresh report.
splice() {
    local name="$1" report="$2"
    awk -v report="$report" -v begin="<!-- $name:begin -->" -v end="<!-- $name:end -->" '
        $0 == begin { print; while ((getline line < report) > 0) print line; skipping = 1; next }
        $0 == end { skipping = 0 }
        !skipping { print }
    ' README.md > README.md.tmp && mv README.md.tmp README.md
}
splice backoff results/backoff.md
splice runners results/runners.md
splice jitter-sim results/jitter-simulation.md

echo "== wrote results/ and the runner and jitter tables in README.md" >&2
