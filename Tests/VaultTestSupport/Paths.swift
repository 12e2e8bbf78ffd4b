import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The checkout the tests were built from (scripts, Tests/plugins, Fuzz/corpus...).
public let repositoryRoot: String = URL(fileURLWithPath: #filePath)  // Tests/VaultTestSupport/Paths.swift
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// A program this package builds (vaultd, vaultctl, vault-fpstub): `$envKey`
/// when set, else beside the test bundle (SwiftPM puts executables and the
/// .xctest in one directory), else `<package>/.build/debug/NAME`. The last
/// candidate is returned when none exists, so the caller can name it.
public func builtExecutable(_ name: String, env envKey: String) -> String {
    if let v = ProcessInfo.processInfo.environment[envKey], !v.isEmpty { return v }
    var candidates: [String] = []
    for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
        candidates.append(URL(fileURLWithPath: bundle.bundlePath).deletingLastPathComponent().appendingPathComponent(name).path)
    }
    if let exe = Bundle.main.executableURL {
        candidates.append(exe.deletingLastPathComponent().appendingPathComponent(name).path)
    }
    candidates.append(repositoryRoot + "/.build/debug/" + name)
    return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[candidates.count - 1]
}

public struct TemporaryDirectoryError: Error, CustomStringConvertible {
    public let description: String
}

/// A fresh directory `BASE/PREFIX.XXXXXX` (BASE: `$TMPDIR`, else /tmp), made by
/// mkdtemp: mode 0700, which plugin and store safety checks insist on, and
/// never a name that already exists. Pass a short `base` where a socket path
/// inside must stay under the 108-byte limit.
public func makeTemporaryDirectory(_ prefix: String = "sessionvault-test", in base: String? = nil) throws -> String {
    let base = base ?? ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
    var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { buffer in
        buffer.baseAddress.flatMap { mkdtemp($0) }.map { String(cString: $0) }
    }
    guard let made else {
        throw TemporaryDirectoryError(description: "mkdtemp in \(base) failed: \(String(cString: strerror(errno)))")
    }
    return made
}
