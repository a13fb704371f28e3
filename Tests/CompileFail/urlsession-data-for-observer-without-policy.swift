// expect-error: missing argument for parameter 'retryPolicy'
// The async form: an observer without `retryPolicy:` is no retrying call either.
import Foundation
import RetryKitHTTP

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

func load(_ session: URLSession, _ request: URLRequest) async throws -> Data {
    let (data, _) = try await session.data(for: request) { event in print(event) }
    return data
}
