import DaemonConfig
import FingerprintFactor
import Logging
import VaultFactor
import VaultProtocol

extension VaultDaemon {
    /// The fingerprint factor `[fingerprint] reader` asks for, or nil for none.
    /// A wrong value or the stub without its opt-in ends vaultd with a sentence.
    static func fingerprintFactor(_ file: FileConfig, demo: Bool, dataDir: String, logger: Logger,
                                  language: Language) async -> (any UnlockFactor)? {
        let choice: FingerprintReaderChoice
        do {
            choice = try FingerprintReaderChoice.from(file)
        } catch {
            fail(Messages.configInvalid, detail: error.detail, language: language, code: 2)
        }
        let scanTimeout = Duration.seconds(file.fingerprint?.scan_timeout ?? 30)
        switch choice {
        case .none:
            return nil
        case .auto, .fprintd:
            // fprintd on the system bus (DBUS_SYSTEM_BUS_ADDRESS first, as GIO finds it); what a
            // scan ignored (signals not from fprintd) goes to the debug log.
            let reader = FprintdReader(log: { logger.debug("\($0)", metadata: ["reader": "fprintd"]) })
            let device = await reader.presence() == .present ? await reader.deviceName() : nil
            guard device != nil || choice == .fprintd else {
                logger.info("no fingerprint reader through fprintd: fingerprint login is not offered", metadata: ["reader": "auto"])
                return nil
            }
            if let device {
                logger.notice("fingerprint reader: fprintd", metadata: ["device": "\(device)", "reader": "\(choice.rawValue)"])
            } else {
                logger.warning("\(FingerprintMessages.serviceNotAnswering.en)", metadata: ["reader": "fprintd"])
            }
            return FingerprintFactor(reader: reader, scanTimeout: scanTimeout, device: device, sameFingerInvisible: true)
        case .stub:
            // The simulated sensor (driven by vault-fpstub): any program of the
            // user can queue a match, so it is for demos and tests only, asked
            // for twice (reader and opt-in) and announced on every start.
            guard demo || file.fingerprint?.allow_stub_reader == true else {
                fail(Messages.stubReaderNotAllowed, detail: "[fingerprint] reader = \"stub\" without allow_stub_reader = true or --demo",
                     language: language, code: 2)
            }
            let reader = StubReader(path: Paths.stubReaderState(config: file, dataDir: dataDir))
            logger.warning("the fingerprint reader is the stub, a simulation: any program running as this user can make it report a match; never use it for real sessions",
                           metadata: ["state": "\(reader.path)", "allowed_by": "\(demo ? "--demo" : "allow_stub_reader")"])
            // Without its state file there is no reader, and the fingerprint is simply not offered.
            return FingerprintFactor(reader: reader, scanTimeout: scanTimeout)
        }
    }
}
