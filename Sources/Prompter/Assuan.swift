/// The few pieces of the Assuan protocol (the line protocol gpg-agent speaks to
/// pinentry) that a prompter needs: escaping command arguments, decoding `D`
/// lines, and reading `ERR` codes.
enum Assuan {
    /// Assuan lines may be at most 1000 bytes, the newline included.
    static let maxLine = 1000

    /// `text` as a command argument: `%`, CR, LF and other control bytes
    /// percent-escaped (pinentry shows `%0A` as a line break), cut at a
    /// character boundary so that `command + " " + argument` fits one line.
    static func escape(_ text: String, budget: Int) -> String {
        var out = ""
        var used = 0
        for scalar in text.unicodeScalars {
            let piece: String
            if scalar == "%" || scalar.value < 0x20 || scalar.value == 0x7F {
                piece = "%" + String(UInt8(scalar.value), radix: 16, uppercase: true).leftPadded(2)
            } else {
                piece = String(scalar)
            }
            let n = piece.utf8.count
            if used + n > budget { break }
            out += piece
            used += n
        }
        return out
    }

    /// The line for `command` with `argument`, escaped and fitted into one line.
    static func line(_ command: String, _ argument: String? = nil) -> [UInt8] {
        guard let argument else { return Array((command + "\n").utf8) }
        let budget = maxLine - command.utf8.count - 2
        return Array((command + " " + escape(argument, budget: budget) + "\n").utf8)
    }

    /// Percent-decodes `bytes` (a `D` line's payload) into `out`, returning
    /// how many bytes were written; nil for a malformed escape. `out` must be
    /// at least as long as `bytes`.
    static func unescape(_ bytes: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Int? {
        var i = 0
        var n = 0
        while i < bytes.count {
            var b = bytes[i]
            if b == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, let hi = hex(bytes[i + 1]), let lo = hex(bytes[i + 2]) else { return nil }
                b = hi << 4 | lo
                i += 3
            } else {
                i += 1
            }
            out[n] = b
            n += 1
        }
        return n
    }

    static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// What an `ERR` line's code means to us. Codes are libgpg-error values:
    /// the source in the top byte (pinentry's is 5), the error in the low 16 bits.
    enum Failure: Equatable {
        /// GPG_ERR_CANCELED: the person pressed Cancel or closed the window.
        case cancelled
        /// GPG_ERR_TIMEOUT: pinentry's own SETTIMEOUT ran out.
        case timeout
        /// GPG_ERR_NOT_CONFIRMED: the person pressed the SETNOTOK button.
        case notConfirmed
        /// Anything else (no display, unknown command, …).
        case other(UInt32)

        init(line: some Collection<UInt8>) {
            // "ERR 83886179 Operation cancelled <Pinentry>"
            let digits = line.dropFirst(4).prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
            let code = UInt32(String(decoding: digits, as: UTF8.self)) ?? 0
            switch code & 0xFFFF {
            case 99: self = .cancelled
            case 62: self = .timeout
            case 114: self = .notConfirmed
            default: self = .other(code)
            }
        }
    }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
