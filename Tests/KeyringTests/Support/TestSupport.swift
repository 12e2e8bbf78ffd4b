import Foundation
import XCTest

/// Secret Service tests run against the private keyring `scripts/with-keyring` provides,
/// never the developer's own. Without it they fail loudly (a silent skip would let CI go
/// green without ever testing the keyring) unless skipping was asked for.
func requireTestKeyring(file: StaticString = #filePath, line: UInt = #line) throws -> Bool {
    let env = ProcessInfo.processInfo.environment
    if env["SESSIONVAULT_TEST_KEYRING"] == "1" { return true }
    if env["SESSIONVAULT_SKIP_KEYRING_TESTS"] == "1" {
        throw cannotRunHere("SESSIONVAULT_SKIP_KEYRING_TESTS=1")
    }
    XCTFail("""
        This Secret Service test needs a private keyring. Run it through scripts/with-keyring, \
        e.g. `scripts/with-keyring swift test --filter KeyringTests`, or set \
        SESSIONVAULT_SKIP_KEYRING_TESTS=1 to skip it.
        """, file: file, line: line)
    return false
}

/// Tests that start their own bus and keyring need the tools, not an outer keyring.
func requireKeyringTools() throws {
    if ProcessInfo.processInfo.environment["SESSIONVAULT_SKIP_KEYRING_TESTS"] == "1" {
        throw cannotRunHere("SESSIONVAULT_SKIP_KEYRING_TESTS=1")
    }
}

/// What a test throws when it cannot run here (skipping was asked for, a tool is
/// missing): a skip on a developer's machine, a failure under `CI=true`, where a
/// skipped suite would let the run go green without having tested anything.
func cannotRunHere(_ reason: String) -> any Error {
    guard ProcessInfo.processInfo.environment["CI"] == "true" else { return XCTSkip(reason) }
    return CommandError(description: "CI=true, so this is a failure, not a skip: \(reason)")
}

let repositoryRoot: String = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
    var timedOut: Bool
}

/// Runs a command (looked up on PATH unless absolute), killed after `timeout`.
/// Output goes through files so a chatty child cannot block on a full pipe.
func runCommand(_ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
                input: String? = nil, timeout: TimeInterval = 30) throws -> CommandResult {
    let scratch = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    let outPath = scratch + "/stdout", errPath = scratch + "/stderr"
    guard FileManager.default.createFile(atPath: outPath, contents: nil),
          FileManager.default.createFile(atPath: errPath, contents: nil),
          let out = FileHandle(forWritingAtPath: outPath),
          let err = FileHandle(forWritingAtPath: errPath) else {
        throw CommandError(description: "cannot create output files in \(scratch)")
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    process.environment = environment
    process.standardOutput = out
    process.standardError = err
    let stdin = Pipe()
    process.standardInput = input == nil ? FileHandle.nullDevice : stdin
    try process.run()
    try? out.close()
    try? err.close()
    if let input {
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try? stdin.fileHandleForWriting.close()
    }
    let deadline = Date().addingTimeInterval(timeout)
    var timedOut = false
    while process.isRunning {
        if Date() > deadline {
            timedOut = true
            process.terminate()
            break
        }
        usleep(5_000)
    }
    process.waitUntilExit()
    return CommandResult(status: process.terminationStatus,
                         stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
                         stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "",
                         timedOut: timedOut)
}

struct CommandError: Error, CustomStringConvertible {
    let description: String
}

func makeTemporaryDirectory() throws -> String {
    let base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
    var template = Array("\(base)/sessionvault-keyring-test.XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { buffer in
        buffer.baseAddress.flatMap { mkdtemp($0) }.map { String(cString: $0) }
    }
    guard let made else { throw CommandError(description: "mkdtemp in \(base) failed") }
    return made
}

/// A vault name no other test (or earlier run) uses.
func uniqueVaultName(_ prefix: String = "test") -> String {
    "\(prefix)-\(UUID().uuidString)"
}
