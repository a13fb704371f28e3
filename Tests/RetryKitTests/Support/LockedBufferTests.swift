import Dispatch
import Testing

@testable import RetryKit

/// A buffer with fields and a tail, as the bridge uses one.
private final class TestBuffer: LockedBuffer<Int, TestFields> {
    deinit { tearDown() }

    /// A buffer holding `state`, `fields` and room for a tail (created on this class, as RetryKit's subclasses do).
    static func make(_ state: Int, fields: TestFields, tailSize: Int = 0, tailAlignment: Int = 1) -> TestBuffer {
        let capacity = capacity(tailSize: tailSize, tailAlignment: tailAlignment)
        let buffer = unsafeDowncast(
            create(minimumCapacity: capacity) { _ in LockPrimitive.Raw() }, to: TestBuffer.self)
        buffer.initialize(state, fields: fields)
        return buffer
    }
}

/// Fields with a reference, to see that the buffer releases them.
private struct TestFields {
    let tracker: Tracker
    let tag: Int
}

/// An object whose release a test observes through a weak reference.
private final class Tracker: Sendable {}

/// A state that needs more than a word's alignment, for the layout's other path.
private struct WideState {
    var value: SIMD4<Double> = .zero
    var tracker: Tracker?
}

private final class WideBuffer: LockedBuffer<WideState, SIMD2<Double>> {
    deinit { tearDown() }

    /// A buffer holding `state` and `fields`.
    static func make(_ state: WideState, fields: SIMD2<Double>) -> WideBuffer {
        let buffer = unsafeDowncast(
            create(minimumCapacity: capacity()) { _ in LockPrimitive.Raw() }, to: WideBuffer.self)
        buffer.initialize(state, fields: fields)
        return buffer
    }
}

@Suite("LockedBuffer")
struct LockedBufferTests {
    @Test("the lock needs no more than the word alignment of the buffer's elements")
    func lockAlignment() {
        #expect(MemoryLayout<LockPrimitive.Raw>.alignment <= MemoryLayout<UInt>.alignment)
    }

    @Test("the state is changed under the lock, the fields are read without it")
    func stateAndFields() {
        let tracker = Tracker()
        let buffer = TestBuffer.make(1, fields: TestFields(tracker: tracker, tag: 7))
        #expect(
            buffer.withLock { state in
                state += 41
                return state
            } == 42)
        #expect(buffer.withLock { $0 } == 42)
        #expect(buffer.field(\.tag) == 7)
        #expect(buffer.field(\.tracker) === tracker)
    }

    @Test("the tail has its size and alignment, apart from the state and the fields", arguments: [1, 8, 16, 64])
    func tail(alignment: Int) {
        let size = 3 * alignment + 5
        let buffer = TestBuffer.make(
            -1, fields: TestFields(tracker: Tracker(), tag: 9), tailSize: size,
            tailAlignment: alignment)
        let tail = buffer.tail(alignment: alignment)
        #expect(Int(bitPattern: tail) % alignment == 0)
        #expect(buffer.tail(alignment: alignment) == tail)
        for index in 0..<size { tail.storeBytes(of: 0xAB, toByteOffset: index, as: UInt8.self) }
        // Filling the tail touched neither the state nor the fields.
        #expect(buffer.withLock { $0 } == -1)
        #expect(buffer.field(\.tag) == 9)
        #expect((0..<size).allSatisfy { tail.load(fromByteOffset: $0, as: UInt8.self) == 0xAB })
    }

    @Test("a state and fields aligned past a word are placed at their alignment")
    func wideAlignment() {
        let buffer = WideBuffer.make(WideState(), fields: SIMD2(3, 4))
        buffer.withLock { $0.value = SIMD4(1, 2, 3, 4) }
        #expect(buffer.withLock { $0.value } == SIMD4(1, 2, 3, 4))
        #expect(buffer.field(\.self) == SIMD2(3, 4))
        buffer.withLock { state in
            withUnsafePointer(to: &state) { #expect(Int(bitPattern: $0) % MemoryLayout<WideState>.alignment == 0) }
        }
    }

    @Test("releasing the buffer releases its state and its fields")
    func release() {
        weak var inState: Tracker?
        weak var inFields: Tracker?
        do {
            let stateTracker = Tracker()
            let fieldsTracker = Tracker()
            inState = stateTracker
            inFields = fieldsTracker
            let wide = WideBuffer.make(WideState(tracker: stateTracker), fields: .zero)
            let buffer = TestBuffer.make(0, fields: TestFields(tracker: fieldsTracker, tag: 0))
            #expect(wide.withLock { $0.tracker } === stateTracker)
            #expect(buffer.field(\.tracker) === fieldsTracker)
        }
        #expect(inState == nil)
        #expect(inFields == nil)
    }

    @Test("concurrent increments under the lock are none of them lost")
    func concurrentIncrements() {
        let counter = Locked(0)
        let buffer = TestBuffer.make(0, fields: TestFields(tracker: Tracker(), tag: 1))
        let shared = UncheckedBox(buffer)
        let threads = 8
        let increments = 10_000
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<increments {
                shared.value.withLock { $0 += 1 }
                counter.withLock { $0 += 1 }
            }
        }
        #expect(buffer.withLock { $0 } == threads * increments)
        #expect(counter.withLock { $0 } == threads * increments)
    }
}

/// A buffer handed to other threads: it is only used through its lock.
private struct UncheckedBox: @unchecked Sendable {
    let value: TestBuffer

    init(_ value: TestBuffer) {
        self.value = value
    }
}
