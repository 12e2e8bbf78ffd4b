import XCTest
@testable import SodiumKit

final class SecretBoxTests: XCTestCase {
    let ad = Array("record-1|v1".utf8)

    func key() throws -> SecureBytes { try SecureBytes.random(count: 32) }

    func testRoundTrip() throws {
        let k = try key()
        for size in [0, 1, 31, 32, 1000, 70_000] {
            let plain = Random.bytes(size)
            let box = try SecretBox.seal(plain, key: k, associatedData: ad)
            XCTAssertEqual(box.bytes.count, size + SealedBox.nonceSize + SealedBox.tagSize)
            XCTAssertEqual(try SecretBox.openToArray(box, key: k, associatedData: ad), plain)
        }
    }

    /// The MAC from plain memory is the derivation of the same bytes (stored
    /// grant ids and audit MACs depend on it).
    func testMACIsTheDerivationOfItsMessage() throws {
        let key = try SecureBytes.random(count: 32)
        for message in [[], Array("a".utf8), Array("flatpak:org.example.App\u{0}kari".utf8), [UInt8](repeating: 7, count: 1000)] {
            XCTAssertEqual(try KeyDerivation.mac(key: key, message: message),
                           try KeyDerivation.derive(key: key, parts: [.bytes(message)]).unsafeCopyToArray())
        }
        XCTAssertNotEqual(try KeyDerivation.mac(key: key, message: [1]), try KeyDerivation.mac(key: try SecureBytes.random(count: 32), message: [1]))
    }

    func testNonceIsFreshEachTime() throws {
        let k = try key()
        let a = try SecretBox.seal([1, 2, 3], key: k, associatedData: ad)
        let b = try SecretBox.seal([1, 2, 3], key: k, associatedData: ad)
        XCTAssertNotEqual(a.bytes, b.bytes)
    }

    /// Every byte position class: nonce, ciphertext, tag. Each single-bit flip must fail to open.
    func testTamperingWithAnyByteFails() throws {
        let k = try key()
        let plain = Array("a refresh token, say".utf8)
        let box = try SecretBox.seal(plain, key: k, associatedData: ad)
        let n = SealedBox.nonceSize
        let positions = [0, n / 2, n - 1, n, n + plain.count / 2, n + plain.count - 1, n + plain.count, box.bytes.count - 1]
        for position in positions {
            for bit in [0, 7] {
                var bytes = box.bytes
                bytes[position] ^= UInt8(1 << bit)
                let tampered = try SealedBox(bytes: bytes)
                XCTAssertThrowsError(try SecretBox.open(tampered, key: k, associatedData: ad), "byte \(position) bit \(bit)") {
                    XCTAssertEqual($0 as? SodiumError, .openFailed)
                }
            }
        }
    }

    func testWrongAssociatedDataFails() throws {
        let k = try key()
        let box = try SecretBox.seal([9, 9, 9], key: k, associatedData: ad)
        for other in [Array("record-2|v1".utf8), Array("record-1|v2".utf8), [], ad + [0]] {
            XCTAssertThrowsError(try SecretBox.open(box, key: k, associatedData: other)) {
                XCTAssertEqual($0 as? SodiumError, .openFailed)
            }
        }
    }

    func testWrongKeyFails() throws {
        let box = try SecretBox.seal([1], key: try key(), associatedData: ad)
        XCTAssertThrowsError(try SecretBox.open(box, key: try key(), associatedData: ad))
    }

    func testTruncatedBoxIsMalformedNotACrash() throws {
        XCTAssertThrowsError(try SealedBox(bytes: Array(repeating: 0, count: SealedBox.nonceSize + SealedBox.tagSize - 1))) {
            guard case .malformed = $0 as? SodiumError else { return XCTFail("expected malformed, got \($0)") }
        }
        let k = try key()
        let box = try SecretBox.seal([1, 2, 3, 4], key: k, associatedData: ad)
        let cut = try SealedBox(bytes: Array(box.bytes.dropLast(2)))
        XCTAssertThrowsError(try SecretBox.open(cut, key: k, associatedData: ad))
    }

    func testShortKeyRejected() throws {
        let short = try SecureBytes.random(count: 16)
        XCTAssertThrowsError(try SecretBox.seal([1], key: short, associatedData: ad))
    }
}

final class KeyDerivationTests: XCTestCase {
    func testDeterministicAndSeparated() throws {
        var raw = Random.bytes(32)
        let saved = raw
        let k = try SecureBytes.consuming(&raw)
        XCTAssertEqual(raw, Array(repeating: 0, count: 32), "the source copy is wiped")
        XCTAssertEqual(k.unsafeCopyToArray(), saved)

        let a = try KeyDerivation.derive(key: k, parts: [.label("x"), .bytes([1, 2])])
        let b = try KeyDerivation.derive(key: k, parts: [.label("x"), .bytes([1, 2])])
        XCTAssertTrue(a.constantTimeEquals(b))
        // Length prefixes: moving a byte between parts changes the result.
        let c = try KeyDerivation.derive(key: k, parts: [.label("x"), .bytes([1]), .bytes([2])])
        let d = try KeyDerivation.derive(key: k, parts: [.label("x1"), .bytes([2])])
        XCTAssertFalse(a.constantTimeEquals(c))
        XCTAssertFalse(c.constantTimeEquals(d))
        // Another key, another result.
        let other = try KeyDerivation.derive(key: try SecureBytes.random(count: 32), parts: [.label("x"), .bytes([1, 2])])
        XCTAssertFalse(a.constantTimeEquals(other))
    }

    func testSecretPartsEqualBytesParts() throws {
        let k = try SecureBytes.random(count: 32)
        var s = [UInt8](repeating: 7, count: 10)
        let secret = try SecureBytes.consuming(&s)
        let a = try KeyDerivation.derive(key: k, parts: [.secret(secret)])
        let b = try KeyDerivation.derive(key: k, parts: [.bytes([UInt8](repeating: 7, count: 10))])
        XCTAssertTrue(a.constantTimeEquals(b))
    }

    func testSHA256KnownAnswer() {
        XCTAssertEqual(Digest.hex(Digest.sha256(Array("abc".utf8))),
                       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}

final class PasswordHashTests: XCTestCase {
    func testArgon2idDeterministicPerSalt() throws {
        let cost = PasswordHash.Cost(opsLimit: 2, memLimit: 8 * 1024 * 1024)
        let pin = try SecureBytes.utf8("482915")
        let salt = Random.bytes(PasswordHash.saltSize)
        let a = try PasswordHash.argon2id(pin, salt: salt, cost: cost)
        let b = try PasswordHash.argon2id(pin, salt: salt, cost: cost)
        XCTAssertTrue(a.constantTimeEquals(b))
        let c = try PasswordHash.argon2id(pin, salt: Random.bytes(PasswordHash.saltSize), cost: cost)
        XCTAssertFalse(a.constantTimeEquals(c))
        let d = try PasswordHash.argon2id(try SecureBytes.utf8("482916"), salt: salt, cost: cost)
        XCTAssertFalse(a.constantTimeEquals(d))
    }

    func testDefaultCostIsAtLeast64MiB() {
        XCTAssertGreaterThanOrEqual(PasswordHash.Cost.interactive.memLimit, 64 * 1024 * 1024)
    }

    func testBadSaltIsAnErrorNotACrash() throws {
        XCTAssertThrowsError(try PasswordHash.argon2id(try SecureBytes.utf8("1"), salt: [1, 2], cost: .interactive))
    }
}

final class SecureBytesConsumingTests: XCTestCase {
    /// The caller's own storage is wiped, not a copy made by wiping an array
    /// whose storage a second reference shared.
    func testConsumingWipesTheCallersStorageInPlace() throws {
        var pin: [UInt8] = Array("482915".utf8)
        let before = pin.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
        let secret = try SecureBytes.consuming(&pin)
        XCTAssertEqual(pin.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }, before, "the array was copied before the wipe")
        XCTAssertEqual(pin, [UInt8](repeating: 0, count: 6))
        XCTAssertEqual(secret.withUnsafeBytes { Array($0) }, Array("482915".utf8))
    }
}
