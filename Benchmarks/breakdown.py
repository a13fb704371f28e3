#!/usr/bin/env python3
"""breakdown.py WORKLOAD [BASELINE]: where a workload's instructions per iteration go, by category.

Reads the callgrind outputs that `./instructions.sh` leaves in .build/instructions (the first run at N and at 2N, N
taken from the file names) and prints, per iteration ((Ir(2N) - Ir(N)) / N, start-up cancels out), the exclusive
instructions of every function grouped into categories: RetryKit's runner code, its state machine and strategies,
reference counting, allocation, Dispatch, locks, clock reads, the workload's own code. With BASELINE, both workloads
side by side, e.g. `./breakdown.py callback-retrykit callback-hand`.
"""
import collections
import glob
import os
import re
import subprocess
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".build", "instructions")

# First match wins: RetryKit's own functions are named before anything their mangled names may mention (Dispatch).
CATEGORIES = [
    ("allocation (malloc, free, object alloc and dealloc)",
     r"malloc|_int_free|arena\.c|swift_slowAlloc|swift_allocObject|swift_deallocObject|swift_slowDealloc|"
     r"_swift_release_dealloc|deallocClassInstance|deallocPartial"),
    ("reference counting", r"swift_retain|swift_release|doDecrementSlow|swift_bridgeObject|swift_isUniquelyReferenced"),
    ("locks", r"pthread_mutex|os_unfair_lock"),
    ("clock reads", r"clock_gettime|ContinuousTime"),
    ("the workload (operation, completion, chaining)", r"Workloads\.swift|9Workloads|objectdestroy"),
    ("RetryKit: state machine, strategies, delay math",
     r"RetryStateMachine|DelayMath|BackoffStrategy|RetryStrategy|RetryError|StateMachine|8RetryKit0A8Strategy"),
    ("RetryKit: runner (carrying out actions, records, handle, closures)", r"RetryKit|CallbackRunner|Callback"),
    ("Dispatch (queue hops, blocks)", r"dispatch|Dispatch|_Block_|block_copy|block_destroy|IeyBh_TR|_os_object"),
    ("memcpy", r"memmove|memcpy|memset"),
]


def exclusive(path):
    """Exclusive Ir per function of one callgrind output."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", path],
                         capture_output=True, text=True, check=True).stdout
    costs = collections.Counter()
    for line in out.split("-- Auto-annotated source")[0].splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(\S.*)", line)
        if m and not m.group(2).startswith("=>") and "PROGRAM TOTALS" not in m.group(2):
            costs[m.group(2).split(" [")[0]] += int(m.group(1).replace(",", ""))
    return costs


def category(function):
    for name, pattern in CATEGORIES:
        if re.search(pattern, function):
            return name
    return "other (Swift runtime and standard library: Duration, casts, metadata)"


def per_iteration(workload):
    files = {}
    for path in glob.glob(os.path.join(HERE, f"callgrind.{workload}.*.1.out")):
        count = int(path.split(".")[-3])
        files[count] = path
    pairs = [count for count in sorted(files, reverse=True) if 2 * count in files]  # the largest N measured
    if not pairs:
        sys.exit(f"no callgrind outputs of {workload} at N and 2N in {HERE}: run ./instructions.sh first")
    n = pairs[0]
    a, b = exclusive(files[n]), exclusive(files[2 * n])
    result = collections.Counter()
    for function in set(a) | set(b):
        result[category(function)] += (b[function] - a[function]) / n
    return result


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    workloads = sys.argv[1:]
    tables = [per_iteration(w) for w in workloads]
    names = sorted(set().union(*tables), key=lambda c: -tables[0][c])
    print("| category | " + " | ".join(workloads) + " |")
    print("| --- |" + " ---: |" * len(workloads))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{t[name]:,.0f}" for t in tables) + " |")
    print("| **total** | " + " | ".join(f"**{sum(t.values()):,.0f}**" for t in tables) + " |")


if __name__ == "__main__":
    main()
