// The demo providers' only pages: choose a synthetic person, or an error. Plain HTML,
// no scripts, no images: headings, a form, and buttons a screen reader reads in order.
// Norwegian first (the page's language), English marked `lang="en"`.

private let pageHeaders: [(String, String)] = [
    ("Content-Type", "text/html; charset=utf-8"),
    ("Cache-Control", "no-store"),
    // The form posts back here and is then redirected to the app's loopback listener.
    ("Content-Security-Policy",
     "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' http://127.0.0.1:*; frame-ancestors 'none'; base-uri 'none'"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Content-Type-Options", "nosniff"),
]

private let style = """
    body { font-family: system-ui, sans-serif; font-size: 1.125rem; line-height: 1.5; margin: 2rem auto; max-width: 40rem; padding: 0 1rem; }
    .demo { border: 3px solid; padding: 0.5rem 1rem; }
    ul { list-style: none; padding: 0; }
    li { margin: 0.75rem 0; }
    button { font: inherit; padding: 0.6rem 1rem; width: 100%; text-align: left; border: 2px solid; border-radius: 0.3rem; background: Canvas; color: CanvasText; cursor: pointer; }
    button:focus { outline: 3px solid; outline-offset: 3px; }
    .cancel { margin-top: 2rem; }
    """

/// The realistic name this demo stands in for, e.g. "BankID" for "Demo BankID".
private func realName(_ settings: IssuerSettings) -> String {
    settings.kind == .bankID ? "BankID" : "Vipps"
}

func loginPage(settings: IssuerSettings, carried: [(String, String)]) -> HTTPResponse {
    let real = realName(settings)
    let title = htmlEscape(settings.displayName)
    var h = """
        <!doctype html>
        <html lang="nb">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>DEMO – \(title): ikke ekte \(real) / not real \(real)</title>
        <style>\(style)</style>
        </head>
        <body>
        <main>
        <h1>DEMO: \(title) – ikke ekte \(real) <span lang="en">(DEMO: not real \(real))</span></h1>
        <div class="demo">
        <p>Dette er en lokal demo for SessionVault. Ingen ekte innlogging skjer, og personene under er oppdiktet (syntetiske testdata).</p>
        <p lang="en">This is a local demo for SessionVault. No real login happens, and the people below are made up (synthetic test data).</p>
        </div>
        <form method="post" action="/\(htmlEscape(settings.id))/authorize">

        """
    for (name, value) in carried {
        h += "<input type=\"hidden\" name=\"\(htmlEscape(name))\" value=\"\(htmlEscape(value))\">\n"
    }
    h += """
        <h2>Velg en testperson <span lang="en">(Choose a test person)</span></h2>
        <ul>

        """
    for person in DemoIdentity.all {
        let rolesNB = person.roles.map { roleLabel($0).nb }.joined(separator: " og ")
        let rolesEN = person.roles.map { roleLabel($0).en }.joined(separator: " and ")
        let name = htmlEscape(person.name)
        let org = htmlEscape(person.organization)
        h += """
            <li><button type="submit" name="demo_user" value="\(htmlEscape(person.id))">Logg inn som \(name), \(htmlEscape(rolesNB)) i \(org) <span lang="en">(Log in as \(name), \(htmlEscape(rolesEN)) at \(org))</span></button></li>

            """
    }
    h += """
        </ul>
        <p class="cancel"><button type="submit" name="demo_cancel" value="1">Avbryt innloggingen <span lang="en">(Cancel the login)</span></button></p>
        </form>
        </main>
        </body>
        </html>

        """
    return HTTPResponse(status: .ok, headers: pageHeaders, body: Array(h.utf8))
}

/// An error the page cannot send back to the app (unknown client, untrusted redirect_uri, …).
func demoErrorPage(settings: IssuerSettings, message: String) -> HTTPResponse {
    let title = htmlEscape(settings.displayName)
    let h = """
        <!doctype html>
        <html lang="nb">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>DEMO – \(title): feil / error</title>
        <style>\(style)</style>
        </head>
        <body>
        <main>
        <h1>DEMO: \(title) – innloggingen kan ikke fortsette <span lang="en">(the login cannot continue)</span></h1>
        <p>Forespørselen fra appen var ugyldig. Gå tilbake til appen og prøv igjen.</p>
        <p lang="en">The app's request was not valid. Go back to the app and try again.</p>
        <p lang="en">Details: \(htmlEscape(message))</p>
        </main>
        </body>
        </html>

        """
    return HTTPResponse(status: .badRequest, headers: pageHeaders, body: Array(h.utf8))
}
