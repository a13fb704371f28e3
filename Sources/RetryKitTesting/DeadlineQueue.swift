/// Pending items ordered by (deadline, order of insertion): the queue behind ``VirtualScheduler`` and ``VirtualClock``.
///
/// A binary min-heap of keys beside a table of slots that hold the items. Inserting and taking the first item are
/// O(log n); removing an item by its id is O(1): it empties the item's slot (releasing the item at once) and leaves
/// its key in the heap, dropped when it reaches the top, or when the heap is rebuilt because such keys outnumber the
/// live ones. Items due at the same deadline come out first-in first-out: the insertion sequence breaks ties.
///
/// Not thread-safe: the owners keep it inside their lock.
/// Identifies one item inserted in a ``DeadlineQueue``: its slot and its insertion sequence (a slot is reused, a
/// sequence never).
struct DeadlineID: Hashable, Sendable {
    fileprivate var slot: Int
    fileprivate var sequence: UInt64
}

struct DeadlineQueue<Element> {
    typealias ID = DeadlineID

    /// A position in the order: earlier deadline first, then earlier insertion.
    struct Key: Comparable {
        var deadline: Duration
        var id: ID

        static func < (lhs: Key, rhs: Key) -> Bool {
            lhs.deadline != rhs.deadline ? lhs.deadline < rhs.deadline : lhs.id.sequence < rhs.id.sequence
        }

        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.deadline == rhs.deadline && lhs.id == rhs.id
        }
    }

    private struct Slot {
        var sequence: UInt64
        var element: Element?
    }

    private var heap: [Key] = []
    private var slots: [Slot] = []
    private var freeSlots: [Int] = []
    private var nextSequence: UInt64 = 0

    /// The number of items that are pending (inserted, neither taken nor removed).
    private(set) var count = 0

    /// Whether no item is pending.
    var isEmpty: Bool { count == 0 }

    /// Adds `element` due at `deadline` and returns its id.
    mutating func insert(_ element: Element, at deadline: Duration) -> ID {
        let sequence = nextSequence
        nextSequence &+= 1
        let id: ID
        if let slot = freeSlots.popLast() {
            id = ID(slot: slot, sequence: sequence)
            slots[slot] = Slot(sequence: sequence, element: element)
        } else {
            id = ID(slot: slots.count, sequence: sequence)
            slots.append(Slot(sequence: sequence, element: element))
        }
        count += 1
        heap.append(Key(deadline: deadline, id: id))
        siftUp(heap.count - 1)
        return id
    }

    private func isPending(_ id: ID) -> Bool {
        slots[id.slot].sequence == id.sequence && slots[id.slot].element != nil
    }

    /// The pending item with this id, if it has not been taken or removed. Setting replaces a pending element (a `nil`
    /// or a removed item's id is ignored); the item keeps its place.
    subscript(id: ID) -> Element? {
        get { isPending(id) ? slots[id.slot].element : nil }
        set {
            guard let newValue, isPending(id) else { return }
            slots[id.slot].element = newValue
        }
    }

    /// Removes the item with this id and returns it, or `nil` if it is no longer pending.
    mutating func remove(_ id: ID) -> Element? {
        guard let element = take(id) else { return nil }
        if count == 0 {
            heap.removeAll(keepingCapacity: true)
        } else if heap.count > 64 && heap.count > 2 * count {
            rebuild()
        }
        return element
    }

    /// Empties a pending item's slot and returns its element.
    private mutating func take(_ id: ID) -> Element? {
        guard isPending(id) else { return nil }
        let element = slots[id.slot].element
        slots[id.slot].element = nil
        freeSlots.append(id.slot)
        count -= 1
        return element
    }

    /// The first pending item's key, without removing it. Drops keys of removed items on the way.
    mutating func first() -> Key? {
        while let top = heap.first {
            if isPending(top.id) { return top }
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
        guard let element = take(key.id) else { return nil }
        return (key, element)
    }

    /// Every pending item's key, in order. O(n log n).
    var sortedKeys: [Key] {
        heap.filter { isPending($0.id) }.sorted()
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
        let slots = self.slots
        heap.removeAll { slots[$0.id.slot].sequence != $0.id.sequence || slots[$0.id.slot].element == nil }
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
