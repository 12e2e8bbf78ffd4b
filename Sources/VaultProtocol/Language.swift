/// The languages SessionVault speaks to people.
public enum Language: String, Sendable, Codable, CaseIterable {
    case en
    case nb

    /// Picks a language from a locale string such as `nb_NO.UTF-8` or `en_US`.
    /// Norwegian (nb, no, nn) gets bokmål; everything else English.
    public init(locale: String?) {
        let l = (locale ?? "").lowercased()
        if l.hasPrefix("nb") || l.hasPrefix("no") || l.hasPrefix("nn") { self = .nb } else { self = .en }
    }
}

/// One sentence in every language we speak.
public struct LocalizedText: Sendable, Hashable {
    public var en: String
    public var nb: String
    public init(en: String, nb: String) {
        self.en = en
        self.nb = nb
    }
    public func text(_ language: Language) -> String {
        switch language {
        case .en: return en
        case .nb: return nb
        }
    }
}


extension StringProtocol {
    /// Without leading and trailing spaces and tabs, as key files (.desktop,
    /// .flatpak-info) and header values are read.
    public var trimmingSpaces: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first ... last])
    }
}
