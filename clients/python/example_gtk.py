#!/usr/bin/python3
"""A desktop app that never draws a PIN field: it asks SessionVault for its
session with ``prompter="vault"``, so vaultd shows its own dialog (pinentry)
when the vault is locked, and the app only waits.

Shows the role-based home ("Hei, Kari Nordmann — Mentorhuset Oslo, likeperson"),
or the vault's sentence when there is no session. GTK 3 through python3-gi
(Debian: python3-gi, gir1.2-gtk-3.0; run it with /usr/bin/python3, not a venv).

    /usr/bin/python3 example_gtk.py [--account ACCOUNT] [--socket PATH]
"""

import argparse
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gi  # noqa: E402

gi.require_version("Gtk", "3.0")
from gi.repository import Atk, GLib, Gtk  # noqa: E402

from sessionvault import VaultClient, VaultConnectionError, VaultError  # noqa: E402

TEXT = {
    "en": {"title": "Activity log", "waiting": "Getting your login from the vault …", "hello": "Hello, %s",
           "again": "_Try again",
           "unreachable": "The vault (SessionVault) is not running. Log out and in again, or ask your contact person."},
    "nb": {"title": "Aktivitetslogg", "waiting": "Henter innloggingen din fra hvelvet …", "hello": "Hei, %s",
           "again": "_Prøv igjen",
           "unreachable": "Hvelvet (SessionVault) kjører ikke. Logg ut og inn igjen, eller spør kontaktpersonen din."},
}


# The roles a member registry gives, in words a person reads.
ROLES = {
    "peer_mentor": {"en": "peer mentor", "nb": "likeperson"},
    "coordinator": {"en": "coordinator", "nb": "koordinator"},
}


def language():
    locale = (os.environ.get("LC_ALL") or os.environ.get("LC_MESSAGES") or os.environ.get("LANG") or "").lower()
    return "nb" if locale.startswith(("nb", "no", "nn")) else "en"


def home_line(session, lang):
    """ "Hei, Kari Nordmann — Mentorhuset Oslo, likeperson" from the session's claims."""
    claims = session.get("claims") or {}
    line = TEXT[lang]["hello"] % (claims.get("name") or session.get("account", "?"))
    org = claims.get("org_name") or claims.get("org")
    roles = claims.get("roles") or claims.get("role") or []
    roles = roles if isinstance(roles, list) else [roles]
    role = ", ".join(ROLES.get(r, {}).get(lang, r) for r in roles)
    if org or role:
        line += " — " + ", ".join(x for x in (org, role) if x)
    return line


class App(Gtk.Window):
    def __init__(self, account, socket_path):
        self.lang = language()
        super().__init__(title=TEXT[self.lang]["title"])
        self.account, self.socket_path = account, socket_path
        self.set_default_size(520, 160)
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=12, margin=24)
        # A label's accessible name is its text: a screen reader reads the home line itself,
        # and it is announced when it changes (a live region, as AT-SPI's "status").
        self.label = Gtk.Label(label=TEXT[self.lang]["waiting"], wrap=True, xalign=0)
        self.label.get_accessible().set_role(Atk.Role.STATUSBAR)
        # Alt+T / Alt+P as well as Tab and Enter.
        self.button = Gtk.Button(label=TEXT[self.lang]["again"], use_underline=True, no_show_all=True)
        self.button.connect("clicked", lambda _b: self.fetch())
        box.pack_start(self.label, True, True, 0)
        box.pack_start(self.button, False, False, 0)
        self.add(box)
        self.connect("destroy", Gtk.main_quit)
        self.fetch()

    def fetch(self):
        self.button.hide()
        self.label.set_text(TEXT[self.lang]["waiting"])
        # The request may wait minutes for the person at vaultd's dialog: never on the GTK thread.
        threading.Thread(target=self.ask_vault, daemon=True).start()

    def ask_vault(self):
        try:
            with VaultClient(self.socket_path, timeout=300) as vault:
                vault.hello("aktivitetslogg", lang=self.lang, prompter="vault")
                try:
                    session = vault.session(self.account)
                except VaultError as e:
                    if e.code != "no_session":
                        raise
                    # Nobody logged in yet: vaultd asks which login, opens the browser and
                    # offers fingerprint login, in its own dialogs; the app draws none of it.
                    session = vault.call("login")
            GLib.idle_add(self.show, home_line(session, self.lang), True)
        except VaultConnectionError:
            # Said by the client library in English only: the app says it in the person's language.
            GLib.idle_add(self.show, TEXT[self.lang]["unreachable"], False)
        except VaultError as e:
            # vaultd's sentence, already in the language the hello named.
            GLib.idle_add(self.show, e.message or e.code, False)

    def show(self, text, ok):
        self.label.set_text(text)
        print(text, flush=True)  # for scripts/demo and tests
        if not ok:
            # Keyboard first: Enter or Space on the focused button asks again.
            self.button.show()
            self.button.grab_focus()
        return False


def main(argv=None):
    parser = argparse.ArgumentParser(description="A GTK app that gets its session through SessionVault.")
    parser.add_argument("--account", help="which account (needed when there are several)")
    parser.add_argument("--socket", help="vaultd's socket (default: $SESSIONVAULT_SOCKET, ...)")
    args = parser.parse_args(argv)
    App(args.account, args.socket).show_all()
    Gtk.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
