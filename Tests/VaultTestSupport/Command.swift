import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// How a command run by `runCommand` ended.
public struct CommandResult: Sendable {
    /// The exit status, or the signal's number when `signaled`.
    public var status: Int32
    /// True when the process ended by a signal (including the one a timeout sends).
    public var signaled: Bool
    public var stdout: String
    public var stderr: String
    public var timedOut: Bool
    public var elapsed: TimeInterval
}

public struct CommandError: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// Runs `arguments` (an absolute path, else looked up on PATH) with
/// `environment`, feeding `input` on stdin, to completion. Stopped after
/// `timeout` (SIGTERM, then SIGKILL): a wedged tool must not hang the test
/// run. Output goes through files, so a chatty child cannot block on a full pipe.
public func runCommand(_ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
                       input: String? = nil, timeout: TimeInterval = 30) throws -> CommandResult {
    guard let program = arguments.first else { throw CommandError(description: "runCommand: no command") }
    let scratch = try makeTemporaryDirectory("sessionvault-run")
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    let outPath = scratch + "/stdout", errPath = scratch + "/stderr"
    guard FileManager.default.createFile(atPath: outPath, contents: nil),
          FileManager.default.createFile(atPath: errPath, contents: nil),
          let out = FileHandle(forWritingAtPath: outPath), let err = FileHandle(forWritingAtPath: errPath) else {
        throw CommandError(description: "cannot create output files in \(scratch)")
    }
    let process = Process()
    if program.hasPrefix("/") {
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = Array(arguments.dropFirst())
    } else {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
    }
    process.environment = environment
    process.standardOutput = out
    process.standardError = err
    let stdin = Pipe()
    process.standardInput = input == nil ? FileHandle.nullDevice : stdin
    let start = Date()
    try process.run()
    try? out.close()
    try? err.close()
    if let input {
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try? stdin.fileHandleForWriting.close()
    }
    let finished = waitForExit(process, timeout: timeout)
    if !finished { terminate(process) }
    return CommandResult(status: process.terminationStatus, signaled: process.terminationReason == .uncaughtSignal,
                         stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
                         stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "",
                         timedOut: !finished, elapsed: Date().timeIntervalSince(start))
}

/// Waits up to `timeout` for `process` to exit; false if it is still running.
public func waitForExit(_ process: Process, timeout: TimeInterval) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning {
        if Date() > deadline { return false }
        usleep(5_000)
    }
    process.waitUntilExit()
    return true
}

/// SIGTERM, then SIGKILL if it has not exited within `grace` seconds.
public func terminate(_ process: Process, grace: TimeInterval = 3) {
    guard process.isRunning else { return }
    process.terminate()
    if waitForExit(process, timeout: grace) { return }
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
}
