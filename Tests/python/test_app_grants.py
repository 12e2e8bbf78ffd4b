"""Each session only to the apps allowed it, tested as it would be attacked:
the Python client runs inside bubblewrap sandboxes whose /.flatpak-info names
an app, the way Flatpak starts apps; vaultd must see that id, grant the app that
imports, ask (through its own scripted pinentry) for any other, and remember
only what the person chose.

Run from the repository root (needs bwrap, Debian package bubblewrap):
    python3 -m unittest discover -s Tests/python -p 'test_app_grants.py' -v
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from test_client import CLIENT_DIR, VAULTCTL, FakePinentryTestCase, cannot_run_here


BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"
APP = "org.example.Aktivitetslogg"
OTHER = "org.example.Timeliste"

# Runs inside the sandbox: one connection, one op, one JSON line out.
SANDBOXED_APP = r"""
import json, sys
sys.path.insert(0, "/client")
from sessionvault import VaultClient, VaultError
sock, op, account, lang, prompter = sys.argv[1:6]
try:
    with VaultClient(sock, timeout=30) as c:
        c.hello("sandboxed", lang=lang, prompter=prompter or None)
        if op == "import":
            r = c.call("import", issuer="https://login.example.org", client_id="pytest-client", account=account,
                       name="Kari Nordmann", refresh_token="RT-sandbox-secret", access_token="AT-" + account,
                       expires_at=4102444800, provider="bankid")
        elif op == "apps":
            r = c.call("apps")
        elif op == "revoke":
            r = c.call("revoke_app", app=account)
        elif op == "allow":
            app, _, acct = account.partition("/")
            r = c.call("allow_app", app=app, account=acct)
        elif op in ("status", "sessions"):
            r = c.call(op)
        elif op == "logout":
            r = c.call("logout", account=account)
        elif op == "logout_all":
            r = c.call("logout", all=True)
        else:
            r = c.session(account or None)
    print(json.dumps({"ok": r}))
except VaultError as e:
    print(json.dumps({"error": e.code, "message": e.message}))
"""

# Runs inside the sandbox: watches, says "ready", prints each event as a JSON
# line until its stdin closes (the test's way of stopping it).
SANDBOXED_WATCHER = r"""
import json, os, select, sys
sys.path.insert(0, "/client")
from sessionvault import VaultClient
with VaultClient(sys.argv[1], timeout=30) as c:
    c.hello("sandboxed-watcher")
    c.watch()
    print("ready", flush=True)
    while True:
        event = c.next_event(0.05)
        if event is not None:
            print(json.dumps(event), flush=True)
        if select.select([sys.stdin], [], [], 0)[0] and not os.read(0, 1):
            break
"""


class TestAppGrants(FakePinentryTestCase):
    """Flatpak-like sandboxes (bubblewrap) and the grant dialog (scripted pinentry)."""

    PINENTRY_CONFIG = "prompt_timeout = 10\n"
    # After a No the same app is not asked again for two minutes: the test moves time on.
    MOVABLE_CLOCK = True

    @classmethod
    def setUpClass(cls):
        if not os.access(BWRAP, os.X_OK):
            raise cannot_run_here("bwrap not found (apt-get install bubblewrap)")
        if not os.access(VAULTCTL, os.X_OK):
            raise cannot_run_here("vaultctl not found at %s (set VAULTCTL)" % VAULTCTL)
        # vaultd's XDG_DATA_HOME: where Flatpak exports the apps' .desktop entries.
        cls.data_home = tempfile.mkdtemp(prefix="sv-pytest-data-")
        cls.addClassCleanup(shutil.rmtree, cls.data_home, ignore_errors=True)
        cls.exports = os.path.join(cls.data_home, "flatpak", "exports", "share", "applications")
        os.makedirs(cls.exports)
        old = os.environ.get("XDG_DATA_HOME")
        os.environ["XDG_DATA_HOME"] = cls.data_home
        try:
            super().setUpClass()
        finally:
            if old is None:
                del os.environ["XDG_DATA_HOME"]
            else:
                os.environ["XDG_DATA_HOME"] = old

    def dialogs(self):
        """The grant dialogs shown so far: each one's SETDESC and button lines."""
        try:
            with open(self.fake_log) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        shown, current = [], None
        for line in lines:
            if line.startswith("START"):
                current = []
                shown.append(current)
            elif current is not None:
                current.append(line)
        return shown

    def sandbox_command(self, app_id, *program):
        """bwrap around `program`, with a /.flatpak-info naming app_id, the client and vaultd's socket."""
        info = os.path.join(self.fake_dir, "flatpak-info-" + app_id)
        with open(info, "w") as f:
            f.write("[Application]\nname=%s\nruntime=runtime/org.gnome.Platform/x86_64/46\n" % app_id)
        run_dir = os.path.dirname(self.vaultd.socket)
        cmd = [BWRAP, "--die-with-parent", "--tmpfs", "/", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
               "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
               "--ro-bind", info, "/.flatpak-info", "--ro-bind", CLIENT_DIR, "/client", "--bind", run_dir, run_dir,
               "--proc", "/proc", "--dev", "/dev", *program]
        return cmd

    def sandboxed(self, app_id, op, account="kari", lang="en", prompter="vault"):
        """Runs the Python client in a bubblewrap sandbox whose /.flatpak-info names app_id."""
        cmd = self.sandbox_command(app_id, "/usr/bin/python3", "-c", SANDBOXED_APP, self.vaultd.socket, op, account,
                                   lang, prompter)
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                           env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout.strip().splitlines()[-1])

    def vaultctl(self, *args):
        r = subprocess.run([VAULTCTL, *args, "--socket", self.vaultd.socket, "--non-interactive"],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, LANG="C.UTF-8"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout

    def grants(self):
        return {a["app"]: a for a in json.loads(self.vaultctl("apps", "--json"))["apps"]}

    def audit(self):
        with self.client() as c:
            c.hello("pytest-audit")
            return c.call("audit", limit=1000)["entries"]

    def test_two_sandboxed_apps_each_get_only_what_the_person_allowed(self):
        # The app that imports is granted: vaultd saw its Flatpak id through the sandbox.
        base = len(self.dialogs())
        self.script()
        imported = self.sandboxed(APP, "import")
        self.assertEqual(imported.get("ok", {}).get("account"), "kari", imported)
        grants = self.grants()
        self.assertEqual(grants[APP]["kind"], "flatpak")
        self.assertTrue(grants[APP]["verified"])
        self.assertIn("kari", grants[APP]["accounts"])
        own = self.sandboxed(APP, "session")
        self.assertEqual(own.get("ok", {}).get("access_token"), "AT-kari", own)
        self.assertEqual(self.dialogs()[base:], [], "an app's own session needs no dialog")

        # Another sandboxed app is asked about: Deny refuses it.
        self.script("cancel")
        denied = self.sandboxed(OTHER, "session")
        self.assertEqual(denied.get("error"), "app_not_allowed", denied)
        self.assertIn(OTHER, denied["message"])
        dialog = self.dialogs()[-1]
        self.assertIn("SETDESC Allow ‘%s’ to use your BankID session?%%0A%%0AAllowed now: %s." % (OTHER, APP), dialog)
        for button in ("SETOK Allow", "SETNOTOK Only this time", "SETCANCEL Deny"):
            self.assertIn(button, dialog)
        self.after_a_no()

        # Only this time: this release, and the next one is asked again.
        self.script("notok")
        once = self.sandboxed(OTHER, "session")
        self.assertEqual(once.get("ok", {}).get("access_token"), "AT-kari", once)
        self.script("cancel")
        self.assertEqual(self.sandboxed(OTHER, "session").get("error"), "app_not_allowed")
        self.assertNotIn(OTHER, self.grants())
        self.after_a_no()

        # Allow: remembered; no dialog the next time.
        self.script("ok")
        self.assertEqual(self.sandboxed(OTHER, "session").get("ok", {}).get("access_token"), "AT-kari")
        shown = len(self.dialogs())
        self.script()
        self.assertIn("ok", self.sandboxed(OTHER, "session"))
        self.assertEqual(len(self.dialogs()), shown, "an allowed app is not asked again")
        self.assertEqual(self.grants()[OTHER]["accounts"], ["kari"])

        # Revoked: asked again (and refused on Deny); the first app keeps its grant.
        self.assertIn("kari", self.vaultctl("apps", "revoke", OTHER))
        self.assertNotIn(OTHER, self.grants())
        self.script("cancel")
        self.assertEqual(self.sandboxed(OTHER, "session").get("error"), "app_not_allowed")
        self.assertEqual(len(self.dialogs()), shown + 1)
        self.assertIn("ok", self.sandboxed(APP, "session"))
        self.after_a_no()

        # A sandboxed app sees and takes back only its own grants.
        self.script("ok")
        self.assertIn("ok", self.sandboxed(OTHER, "session"))
        seen = self.sandboxed(APP, "apps")["ok"]["apps"]
        self.assertEqual([a["app"] for a in seen], [APP])
        self.assertEqual(self.sandboxed(APP, "revoke", account=OTHER).get("error"), "bad_request")
        self.assertIn(OTHER, self.grants())
        self.assertIn("ok", self.sandboxed(OTHER, "revoke", account=OTHER))
        self.assertNotIn(OTHER, self.grants())

        # In bokmål, the dialog and the refusal.
        self.script("cancel")
        nb = self.sandboxed(OTHER, "session", lang="nb")
        self.assertEqual(nb.get("error"), "app_not_allowed")
        self.assertIn("har ikke lov til å bruke den innloggingen", nb["message"])
        self.assertIn("SETOK Tillat", self.dialogs()[-1])
        self.assertTrue(any(l.startswith("SETDESC Vil du la «%s» bruke BankID-økten din?" % OTHER) for l in self.dialogs()[-1]))
        self.after_a_no()

        # Without a dialog (a client that did not let vaultd ask): refused with the sentence, no dialog.
        shown = len(self.dialogs())
        plain = self.sandboxed(OTHER, "session", prompter="")
        self.assertEqual(plain.get("error"), "app_not_allowed", plain)
        self.assertIn("SessionVault's own dialog", plain["message"])
        self.assertEqual(len(self.dialogs()), shown)

        # The audit log shows every decision, with the app's identity.
        def kari(e):
            return e["detail"].get("account") == "kari" or "kari" in e["detail"].get("accounts", [])
        decisions = [(e["outcome"], e["detail"].get("app"), e["detail"].get("app_kind"))
                     for e in self.audit() if e["event"] == "grant" and kari(e)]
        self.assertEqual(decisions, [
            ("allow", APP, "flatpak"),        # the import
            ("deny", OTHER, "flatpak"), ("once", OTHER, "flatpak"), ("deny", OTHER, "flatpak"),
            ("allow", OTHER, "flatpak"), ("revoked", OTHER, "flatpak"), ("deny", OTHER, "flatpak"),
            ("allow", OTHER, "flatpak"), ("revoked", OTHER, "flatpak"),
            ("deny", OTHER, "flatpak"), ("no_dialog", OTHER, "flatpak"),
        ])
        releases = {(e["detail"].get("app"), e["detail"].get("app_kind")) for e in self.audit() if e["event"] == "release" and kari(e)}
        self.assertEqual(releases, {(APP, "flatpak"), (OTHER, "flatpak")})

    def test_a_sandboxed_app_keeps_at_most_twenty_accounts_imported_ten_a_minute(self):
        hoarder = "org.example.Hoarder"
        self.script()
        for i in range(25):
            self.addCleanup(subprocess.run, [VAULTCTL, "logout", "h%d" % i, "--socket", self.vaultd.socket,
                                             "--non-interactive"], capture_output=True, timeout=30)
        for i in range(10):
            self.assertIn("ok", self.sandboxed(hoarder, "import", account="h%d" % i))
        limited = self.sandboxed(hoarder, "import", account="h10")
        self.assertEqual(limited.get("error"), "rate_limited", limited)
        self.vaultd.move_clock(61)
        for i in range(10, 20):
            self.assertIn("ok", self.sandboxed(hoarder, "import", account="h%d" % i))
        self.vaultd.move_clock(61)
        refused = self.sandboxed(hoarder, "import", account="h20")
        self.assertEqual(refused.get("error"), "app_not_allowed", refused)
        self.assertIn("already keeps 20 logins in SessionVault", refused["message"])
        self.assertEqual(sorted(self.grants()[hoarder]["accounts"]), sorted("h%d" % i for i in range(20)))
        self.assertIn("ok", self.sandboxed(hoarder, "import", account="h3"), "its own account can be replaced")

    def after_a_no(self):
        """Time passes after a Deny: within two minutes the app would not be asked again
        (test_an_app_said_no_to_is_not_asked_again_at_once)."""
        self.vaultd.move_clock(121)

    def test_an_app_said_no_to_is_not_asked_again_at_once(self):
        self.script()
        self.assertIn("ok", self.sandboxed(APP, "import", account="liv"))
        self.addCleanup(self.vaultctl, "logout", "liv")
        self.script("cancel")
        self.assertEqual(self.sandboxed(OTHER, "session", account="liv").get("error"), "app_not_allowed")
        shown = len(self.dialogs())
        # Asking again at once, in a loop: refused without a dialog, in plain words.
        self.script("ok", "ok", "ok")
        for lang, words in (("en", "You said no to ‘%s’ using this login a moment ago" % OTHER),
                            ("nb", "Du sa nei til at «%s» kan bruke denne innloggingen" % OTHER)):
            refused = self.sandboxed(OTHER, "session", account="liv", lang=lang)
            self.assertEqual(refused.get("error"), "app_not_allowed", refused)
            self.assertIn(words, refused["message"])
        self.assertEqual(len(self.dialogs()), shown, "not asked again at once")
        self.assertNotIn("liv", self.grants().get(OTHER, {}).get("accounts", []))
        # Two minutes on, it is asked again.
        self.vaultd.move_clock(121)
        self.assertEqual(self.sandboxed(OTHER, "session", account="liv").get("ok", {}).get("access_token"), "AT-liv")
        self.assertEqual(len(self.dialogs()), shown + 1)

    def test_an_allow_pressed_before_the_question_could_be_read_is_not_taken(self):
        """The attacker: an app raises the grant dialog while the person types in another
        window; the dialog takes the keyboard as it appears and gets their Enter (the
        scripted dialog answers at once). Not a grant: asked again, saying why, and after
        three such answers the app is refused. An Allow that comes once the question could
        be read is taken."""
        self.script()
        self.assertIn("ok", self.sandboxed(APP, "import", account="mia"))
        self.addCleanup(self.vaultctl, "logout", "mia")
        shown = len(self.dialogs())
        self.script("ok-at-once", "notok-at-once", "ok-at-once")
        refused = self.sandboxed(OTHER, "session", account="mia")
        self.assertEqual(refused.get("error"), "app_not_allowed", refused)
        self.assertNotIn("mia", self.grants().get(OTHER, {}).get("accounts", []))
        asked = self.dialogs()[shown:]
        self.assertEqual(len(asked), 3, asked)
        self.assertFalse(any("A key was pressed" in l for l in asked[0]), asked[0])
        for d in asked[1:]:
            self.assertIn("SETDESC A key was pressed just as this question appeared, before you could read it, "
                          "so it was not taken as your answer.", "\n".join(d))
        self.after_a_no()
        self.script("ok-at-once", "ok")
        got = self.sandboxed(OTHER, "session", account="mia", lang="nb")
        self.assertEqual(got.get("ok", {}).get("access_token"), "AT-mia", got)
        self.assertIn("mia", self.grants()[OTHER]["accounts"])
        again = self.dialogs()[shown + 3:]
        self.assertEqual(len(again), 2, again)
        self.assertIn("En tast ble trykket akkurat da dette spørsmålet kom opp", "\n".join(again[1]))

    def watcher(self, app_id):
        """A sandboxed app watching vault events; its stdout yields them, one JSON line each."""
        p = subprocess.Popen(self.sandbox_command(app_id, "/usr/bin/python3", "-c", SANDBOXED_WATCHER, self.vaultd.socket),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        self.addCleanup(p.wait, 10)
        self.addCleanup(p.stdin.close)
        self.assertEqual(p.stdout.readline().strip(), "ready")
        return p

    @staticmethod
    def heard(p):
        """Stops a watcher (communicate closes its stdin); every event it heard."""
        out, _ = p.communicate(timeout=10)
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def test_events_about_an_account_reach_only_the_apps_allowed_it(self):
        self.script()
        self.assertIn("ok", self.sandboxed(APP, "import", account="per"))
        self.script("ok")
        self.assertIn("ok", self.sandboxed(OTHER, "import", account="liv"))
        own, other = self.watcher(APP), self.watcher(OTHER)
        # OTHER is allowed APP's account too, then loses it again.
        self.script("ok")
        self.assertIn("ok", self.sandboxed(OTHER, "session", account="per"))
        self.vaultctl("apps", "revoke", OTHER)
        self.vaultctl("logout", "per")
        self.vaultctl("logout", "liv")   # nobody is allowed it any more: nobody hears it
        time.sleep(0.3)
        self.assertEqual([(e["kind"], e.get("account")) for e in self.heard(own)], [("logged_out", "per")])
        revoked = self.heard(other)
        self.assertEqual(sorted((e["kind"], e.get("account"), e.get("app")) for e in revoked), [
            ("grant_revoked", "liv", "flatpak:" + OTHER), ("grant_revoked", "per", "flatpak:" + OTHER)])

    def test_a_sandboxed_app_sees_and_logs_out_only_its_own_accounts(self):
        self.script()
        self.assertIn("ok", self.sandboxed(APP, "import", account="eva"))
        self.assertIn("ok", self.sandboxed(OTHER, "import", account="tor"))
        listed = lambda app, op: sorted(a["account"] for a in self.sandboxed(app, op)["ok"][
            "accounts" if op == "status" else "sessions"])
        self.assertEqual(listed(APP, "status"), ["eva"])
        self.assertEqual(listed(OTHER, "sessions"), ["tor"])
        everyone = json.loads(self.vaultctl("status", "--json"))
        self.assertEqual(sorted(a["account"] for a in everyone["accounts"]), ["eva", "tor"], "vaultctl sees all")
        # No account named: its own, never "which one?" with the other's name.
        self.assertEqual(self.sandboxed(OTHER, "session", account="").get("ok", {}).get("access_token"), "AT-tor")
        # Another app's account is not there for it: not logged out, not named.
        refused = self.sandboxed(OTHER, "logout", account="eva")
        self.assertEqual(refused.get("error"), "no_session", refused)
        self.assertNotIn("eva", json.dumps(self.sandboxed(OTHER, "logout_all")))
        self.assertEqual(listed(APP, "status"), ["eva"], "logging out everywhere took another app's session")
        self.assertEqual(sorted(a["account"] for a in json.loads(self.vaultctl("status", "--json"))["accounts"]), ["eva"])

    def test_the_person_allows_an_app_from_a_terminal_and_a_sandbox_cannot(self):
        self.script()
        self.assertIn("ok", self.sandboxed(APP, "import", account="siv"))
        self.addCleanup(self.vaultctl, "logout", "siv")   # one vaultd for the class: its grants go with it
        # A sandboxed app cannot grant itself (or anyone) another app's account.
        refused = self.sandboxed(OTHER, "allow", account="flatpak:%s/siv" % OTHER)
        self.assertEqual(refused.get("error"), "app_not_allowed", refused)
        self.assertNotIn(OTHER, self.grants())
        # vaultctl can: then OTHER gets the session with no dialog.
        shown = len(self.dialogs())
        self.assertIn("may now use siv", self.vaultctl("apps", "allow", "flatpak:" + OTHER, "siv"))
        self.assertEqual(self.sandboxed(OTHER, "session", account="siv").get("ok", {}).get("access_token"), "AT-siv")
        self.assertEqual(len(self.dialogs()), shown)
        # A program by its path is resolved to what /proc/PID/exe shows.
        python = os.path.realpath("/usr/bin/python3")
        self.assertIn("may now use siv", self.vaultctl("apps", "allow", "/usr/bin/python3", "siv"))
        self.assertEqual((self.grants()[python]["kind"], self.grants()[python]["verified"]), ("executable", False))
        # A name with no kind, and an account that is not there, are refused with a sentence.
        for args, words in ((("apps", "allow", "Timeliste", "siv"), "KIND:NAME"), (("apps", "allow", "flatpak:x.y", "nobody"), "")):
            r = subprocess.run([VAULTCTL, *args, "--socket", self.vaultd.socket, "--non-interactive"],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertIn(words, r.stderr + r.stdout)
        decisions = [(e["outcome"], e["detail"].get("app"), e["detail"].get("reason")) for e in self.audit()
                     if e["event"] == "grant" and e["detail"].get("account") == "siv"]
        self.assertEqual(decisions, [("allow", APP, "import"), ("allow", OTHER, "vaultctl"), ("allow", python, "vaultctl")])

    def test_a_flatpak_app_is_named_as_the_desktop_names_it(self):
        """Issue 22: the dialog names the app by its exported .desktop entry, in
        the person's language; the entry is one the sandbox cannot write."""
        app = "org.example.Kalender"
        with open(os.path.join(self.exports, app + ".desktop"), "w") as f:
            f.write("[Desktop Entry]\nType=Application\nName=Mentor calendar\nName[nb]=Mentorkalender\nExec=kalender\n")
        self.script()
        self.assertIn("ok", self.sandboxed(APP, "import", account="siri"))
        for lang, question in (("en", "SETDESC Allow ‘Mentor calendar’ to use your BankID session?"),
                               ("nb", "SETDESC Vil du la «Mentorkalender» bruke BankID-økten din?")):
            self.script("notok")
            got = self.sandboxed(app, "session", account="siri", lang=lang)
            self.assertEqual(got.get("ok", {}).get("access_token"), "AT-siri", got)
            dialog = self.dialogs()[-1]
            self.assertTrue(any(l.startswith(question) for l in dialog), dialog)
            self.assertFalse(any(app in l for l in dialog if l.startswith("SETDESC")), dialog)
        # Allowed: the list names it so too (the settings app shows that name).
        self.script("ok")
        self.assertIn("ok", self.sandboxed(app, "session", account="siri"))
        self.assertEqual((self.grants()[app]["name"], self.grants()[APP]["name"]), ("Mentor calendar", APP))
        # An app with no entry is named by its id.
        self.script("cancel")
        self.assertEqual(self.sandboxed("org.example.Ukjent", "session", account="siri").get("error"), "app_not_allowed")
        self.assertTrue(any(l.startswith("SETDESC Allow ‘org.example.Ukjent’ to use") for l in self.dialogs()[-1]))
        # The class's vaultd is shared: leave it as found.
        self.vaultctl("apps", "revoke", app)
        self.vaultctl("logout", "siri")

    def test_an_app_named_like_one_already_allowed_is_said_to_be_another(self):
        """A Flatpak may call itself anything: one that shows the name of an app
        the person already uses is said to be another app, by both ids, in the
        grant dialog it causes; an app with a name of its own is not."""
        real, namesake, other = "org.example.Mentorkalender", "org.example.Mentorkalendar", "org.example.Notater"
        for app, name in ((real, "Mentor calendar"), (namesake, "Mentor calendar"), (other, "Notes")):
            with open(os.path.join(self.exports, app + ".desktop"), "w") as f:
                f.write("[Desktop Entry]\nType=Application\nName=%s\nName[nb]=%s\nExec=x\n" % (name, name + " (nb)"))
        self.script()
        self.assertIn("ok", self.sandboxed(real, "import", account="tove"))
        for lang, warning in (("en", "Careful: another app called ‘Mentor calendar’ can already use your login. That one is %s; "
                                     "this one is %s. Allow this one only if you installed both." % (real, namesake)),
                              ("nb", "Obs: en annen app som heter «Mentor calendar (nb)», kan allerede bruke innloggingen din. "
                                     "Den er %s; denne er %s. Tillat denne bare hvis du har installert begge." % (real, namesake))):
            self.script("notok")
            self.assertIn("ok", self.sandboxed(namesake, "session", account="tove", lang=lang))
            said = [l for l in self.dialogs()[-1] if l.startswith("SETDESC")]
            self.assertTrue(any(warning in l for l in said), said)
        self.script("notok")
        self.assertIn("ok", self.sandboxed(other, "session", account="tove"))
        said = [l for l in self.dialogs()[-1] if l.startswith("SETDESC")]
        self.assertFalse(any("Careful" in l for l in said), said)
        self.assertTrue(any("Allowed now: Mentor calendar." in l for l in said), "the allowed app by its name: %s" % said)
        # The class's vaultd is shared: leave it as found.
        self.vaultctl("apps", "revoke", real)
        self.vaultctl("logout", "tove")

    def test_an_unverified_app_is_labelled_so(self):
        self.script()
        self.assertIn("ok", self.sandboxed(APP, "import", account="ola"))
        # This test process itself: no sandbox, no desktop scope, only its executable.
        exe = os.path.realpath("/proc/self/exe")
        self.script("ok")
        with self.client() as c:
            c.hello("pytest", prompter="vault")
            self.assertEqual(c.session("ola")["access_token"], "AT-ola")
        dialog = self.dialogs()[-1]
        name = os.path.basename(exe)
        # Calm and plain: what SessionVault cannot see, and when to allow it.
        self.assertTrue(any(l.startswith("SETDESC Allow ‘%s’ to use your BankID session?" % name)
                            and "SessionVault cannot see which app this is, only the program it runs (%s)" % name in l
                            and "Allow it if you just opened an app that uses your login." in l
                            and "pretend" not in l and "unverified" not in l for l in dialog), dialog)
        grant = self.grants()[exe]
        self.assertEqual((grant["kind"], grant["verified"]), ("executable", False))
        listed = [l for l in self.vaultctl("apps").splitlines() if l.startswith(exe + "\t")]
        self.assertEqual(len(listed), 1, listed)
        self.assertIn("(executable, unverified)", listed[0])
        self.assertIn("ola", listed[0])


if __name__ == "__main__":
    unittest.main()
