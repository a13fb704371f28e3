import RetryKit

// Both clocks end a sleep at once when the sleeping task is cancelled, so RetryKit's runners call their `sleep`
// directly, from the waiting task (see `SleepEndsOnCancellation` in RetryKit).
extension VirtualClock: SleepEndsOnCancellation {}
extension InstantClock: SleepEndsOnCancellation {}
