// instr-workloads WORKLOAD N [time]: runs one workload of the `Workloads` module N times and prints what it did.
//
// - Without `time`: one run, for `instructions.sh`, which runs it under `valgrind --tool=callgrind` with two values of
//   N and divides the difference of the instruction counts by the difference of N (start-up and one-time costs cancel
//   out).
// - With `time`: a warm-up run, then 5 timed runs of N iterations (wall clock, not under valgrind); prints the median
//   and the least time per iteration in nanoseconds.
//
// Exit status 3 if the workload did not do the expected work (operation calls, successes).

import Dispatch
import Workloads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

let arguments = CommandLine.arguments
guard (3...4).contains(arguments.count), let workload = Workload(rawValue: arguments[1]),
    let count = Int(arguments[2]), count > 0, arguments.count == 3 || arguments[3] == "time"
else {
    print("usage: instr-workloads \(Workload.allCases.map(\.rawValue).joined(separator: "|")) N [time]")
    exit(2)
}

func checked(_ result: WorkloadResult) {
    guard result == workload.expected(iterations: count) else {
        print("workload=\(workload.rawValue) iterations=\(count) calls=\(result.calls) successes=\(result.successes)")
        exit(3)
    }
}

if arguments.count == 3 {
    let result = workload.run(iterations: count)
    print("workload=\(workload.rawValue) iterations=\(count) calls=\(result.calls) successes=\(result.successes)")
    checked(result)
} else {
    checked(workload.run(iterations: count))
    var samples: [Double] = []
    for _ in 0..<5 {
        let start = DispatchTime.now().uptimeNanoseconds
        checked(workload.run(iterations: count))
        samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count))
    }
    samples.sort()
    print("workload=\(workload.rawValue) iterations=\(count) median_ns=\(Int(samples[2])) min_ns=\(Int(samples[0]))")
}
exit(0)
