@_exported import RetryKit
