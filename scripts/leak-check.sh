#!/usr/bin/env bash
# scripts/leak-check.sh [swift test arguments…]
#
# The whole test suite under AddressSanitizer with LeakSanitizer: a leak of anything allocated while the tests ran
# (a retrier's state, a bridge, a timer that keeps its owner alive) fails the run, with the allocation's stack.
#
#   scripts/leak-check.sh                      # every test
#   scripts/leak-check.sh --filter WithRetry   # some tests (extra arguments go to `swift test`)
#
# Builds into its own scratch path (.build-asan), so it does not invalidate the normal build. Leaks that belong to the
# toolchain, not to RetryKit, are suppressed in scripts/lsan-suppressions.txt (each with the reason); nothing of
# RetryKit's is suppressed there.
#
# Exit: 0 clean; 1 a leak (or a test failure, or a sanitizer error); the LeakSanitizer report is printed and kept in
# .build-asan/leak-check.log.
set -uo pipefail
cd "$(dirname "$0")/.."

log=.build-asan/leak-check.log
mkdir -p .build-asan
export ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan-suppressions.txt:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

start=$SECONDS
swift test --sanitize=address --scratch-path .build-asan "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
echo "leak-check: swift test --sanitize=address exited $status after $((SECONDS - start)) s"

if grep -q "ERROR: LeakSanitizer" "$log"; then
    echo "leak-check: LeakSanitizer found leaks:"
    grep -E "^(Direct|Indirect) leak|^SUMMARY: AddressSanitizer" "$log" | sort | uniq -c | sort -rn | head -20
    echo "leak-check: FAILED (full report in $log)"
    exit 1
fi
if [ "$status" != 0 ]; then
    echo "leak-check: FAILED: swift test failed under the address sanitizer (see $log)"
    exit 1
fi
echo "leak-check: clean"
