#!/usr/bin/env bash
# Runs every RetryKit benchmark and the jitter simulation, release builds, and writes the results:
#   results/benchmarks.md         the benchmark harness's report (all targets in Benchmarks/)
#   results/jitter-simulation.md  the jitter simulation's report
# and splices the jitter table into README.md between its jitter-sim markers.
#
# Usage: ./run.sh   (from anywhere; about 1.5 min cold, 20 s warm on the 2-core reference machine)
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p results

machine="$(uname -sm), $(nproc) cores, $(swift --version 2>/dev/null | head -n 1)"
load() { cut -d " " -f 1-3 /proc/loadavg 2>/dev/null || echo "unknown"; }

echo "== benchmarks (swift package benchmark)" >&2
{
    echo "Machine: $machine; load average before the run: $(load)"
    echo
    # Drop the harness's colour codes and its note about the ARC runtime interposer (not used: ARC metrics are off).
    swift package benchmark --no-progress --format markdown \
        | sed -e 's/\x1b\[[0-9;]*m//g' | grep -v -e '^Warning: running with the Swift runtime' -e '^Note: skipping LD_PRELOAD'
} > results/benchmarks.md

echo "== jitter simulation (swift run -c release jitter-sim)" >&2
swift build -c release --product jitter-sim >&2
{
    echo "Machine: $machine"
    echo
    .build/release/jitter-sim
} > results/jitter-simulation.md

# Replace everything between the markers in README.md with the fresh report.
awk -v report="results/jitter-simulation.md" '
    /<!-- jitter-sim:begin -->/ { print; while ((getline line < report) > 0) print line; skipping = 1; next }
    /<!-- jitter-sim:end -->/ { skipping = 0 }
    !skipping { print }
' README.md > README.md.tmp && mv README.md.tmp README.md

echo "== wrote results/benchmarks.md, results/jitter-simulation.md and the jitter table in README.md" >&2
