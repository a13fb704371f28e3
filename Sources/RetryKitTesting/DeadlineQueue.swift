/// Pending items ordered by (deadline, order of insertion): the queue behind ``TestScheduler`` and ``TestClock``.
///
/// A binary min-heap of keys beside a table of the items by id. Inserting, taking the first item and cancelling are
/// O(log n) (cancelling is O(1) and leaves its key in the heap: a key whose item is gone is dropped when it reaches
/// the top, and the heap is rebuilt without such keys when they outnumber the live ones). Items due at the same
/// deadline come out first-in first-out, because the id (the insertion sequence) breaks ties.
///
/// Not thread-safe: the owners keep it inside their lock.
struct DeadlineQueue<Element> {
    /// A position in the order: earlier deadline first, then earlier insertion.
    struct Key: Comparable {
        var deadline: Duration
        var id: UInt64

        static func < (lhs: Key, rhs: Key) -> Bool {
            lhs.deadline != rhs.deadline ? lhs.deadline < rhs.deadline : lhs.id < rhs.id
        }
    }

    private var heap: [Key] = []
    private var items: [UInt64: (deadline: Duration, element: Element)] = [:]
    private var nextID: UInt64 = 0

    /// The number of items that are pending (inserted, not removed).
    var count: Int { items.count }

    /// Whether no item is pending.
    var isEmpty: Bool { items.isEmpty }

    /// Adds `element` due at `deadline` and returns its id, which grows with every insertion.
    mutating func insert(_ element: Element, at deadline: Duration) -> UInt64 {
        let id = nextID
        nextID &+= 1
        items[id] = (deadline, element)
        heap.append(Key(deadline: deadline, id: id))
        siftUp(heap.count - 1)
        return id
    }

    /// The pending item with this id, if it has not been removed. Setting replaces the element (not its deadline).
    subscript(id: UInt64) -> Element? {
        get { items[id]?.element }
        set {
            guard let newValue, let deadline = items[id]?.deadline else { return }
            items[id] = (deadline, newValue)
        }
    }

    /// Removes the item with this id and returns it, or `nil` if it is no longer pending. O(1) (lazily removed from
    /// the heap).
    mutating func remove(_ id: UInt64) -> Element? {
        guard let removed = items.removeValue(forKey: id) else { return nil }
        if items.isEmpty {
            heap.removeAll(keepingCapacity: true)
        } else if heap.count > 64 && heap.count > 2 * items.count {
            rebuild()
        }
        return removed.element
    }

    /// The first pending item's key, without removing it. Drops keys of removed items on the way.
    mutating func first() -> Key? {
        while let top = heap.first {
            if items[top.id] != nil { return top }
            popTop()
        }
        return nil
    }

    /// Removes and returns the first pending item if its deadline is at or before `limit` (whatever its deadline if
    /// `limit` is `nil`).
    mutating func popFirst(dueBy limit: Duration? = nil) -> (key: Key, element: Element)? {
        guard let key = first() else { return nil }
        if let limit, key.deadline > limit { return nil }
        popTop()
        guard let item = items.removeValue(forKey: key.id) else { return nil }
        return (key, item.element)
    }

    /// Every pending item's key, in order. O(n log n).
    var sortedKeys: [Key] {
        items.map { Key(deadline: $0.value.deadline, id: $0.key) }.sorted()
    }

    /// Every pending item's id and element, in no particular order.
    var elements: some Sequence<(id: UInt64, element: Element)> {
        items.lazy.map { (id: $0.key, element: $0.value.element) }
    }

    // MARK: - Heap

    private mutating func popTop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(0)
    }

    /// Keeps only the keys of pending items and restores the heap order bottom-up, O(n).
    private mutating func rebuild() {
        heap.removeAll { items[$0.id] == nil }
        var index = heap.count / 2
        while index > 0 {
            index -= 1
            siftDown(index)
        }
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        let key = heap[child]
        while child > 0 {
            let parent = (child - 1) / 2
            guard key < heap[parent] else { break }
            heap[child] = heap[parent]
            child = parent
        }
        heap[child] = key
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        let key = heap[parent]
        let count = heap.count
        while true {
            var child = 2 * parent + 1
            guard child < count else { break }
            if child + 1 < count && heap[child + 1] < heap[child] { child += 1 }
            guard heap[child] < key else { break }
            heap[parent] = heap[child]
            parent = child
        }
        heap[parent] = key
    }
}

/// Time arithmetic that saturates instead of trapping.
///
/// Virtual time is kept within ±`Int64.max` seconds (about 292 billion years), the range `Duration.components` can
/// describe. Within that range the sum or difference of two values cannot overflow `Duration` (which spans about
/// ±1.7 × 10²⁰ s), so clamping the operands and the result is enough.
enum VirtualTime {
    /// The latest representable virtual time: `Int64.max` seconds.
    static let maximum = Duration.seconds(Int64.max)
    /// The earliest representable virtual time: `Int64.min` seconds.
    static let minimum = Duration.seconds(Int64.min)

    /// `value`, limited to ``minimum``...``maximum``.
    static func clamp(_ value: Duration) -> Duration {
        Swift.min(Swift.max(value, minimum), maximum)
    }

    /// `lhs + rhs`, saturating at ``minimum`` and ``maximum``.
    static func adding(_ lhs: Duration, _ rhs: Duration) -> Duration {
        clamp(clamp(lhs) + clamp(rhs))
    }

    /// `lhs - rhs`, saturating at ``minimum`` and ``maximum``.
    static func subtracting(_ lhs: Duration, _ rhs: Duration) -> Duration {
        clamp(clamp(lhs) - clamp(rhs))
    }
}
