/// A binary min-heap of simulation events, ordered by virtual time and then by insertion order, so that events at
/// the same instant run first-in first-out and every run is deterministic.
struct EventQueue<Payload> {
    private struct Entry {
        var time: Double
        var sequence: UInt64
        var payload: Payload

        func precedes(_ other: Entry) -> Bool {
            time < other.time || (time == other.time && sequence < other.sequence)
        }
    }

    private var heap: [Entry] = []
    private var nextSequence: UInt64 = 0

    var isEmpty: Bool { heap.isEmpty }

    init(capacity: Int) {
        heap.reserveCapacity(capacity)
    }

    mutating func schedule(_ payload: Payload, at time: Double) {
        heap.append(Entry(time: time, sequence: nextSequence, payload: payload))
        nextSequence += 1
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    mutating func next() -> (time: Double, payload: Payload)? {
        guard let first = heap.first else { return nil }
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                guard left < heap.count else { break }
                var smallest = left
                let right = left + 1
                if right < heap.count && heap[right].precedes(heap[left]) { smallest = right }
                guard heap[smallest].precedes(heap[parent]) else { break }
                heap.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return (first.time, first.payload)
    }
}
