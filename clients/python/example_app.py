#!/usr/bin/env python3
"""A tiny "desktop app": asks SessionVault for its session and greets the user.

Prints "Hello, NAME (org/role)" and exits 0, or prints the vault's message
(in the language of $LANG: English or Norwegian) and exits 1.

    python3 example_app.py [--account ACCOUNT] [--interactive] [--socket PATH]

With --interactive the vault may ask for the PIN on this terminal.
"""

import argparse
import getpass
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sessionvault import VaultClient, VaultError  # noqa: E402


def language():
    locale = (os.environ.get("LC_ALL") or os.environ.get("LC_MESSAGES") or os.environ.get("LANG") or "").lower()
    return "nb" if locale.startswith(("nb", "no", "nn")) else "en"


def ask_on_terminal(prompt):
    kind, text = prompt.get("kind"), prompt.get("text", "")
    if kind == "message":
        print(text, file=sys.stderr)
        return None
    try:
        if kind == "secret":
            return getpass.getpass(text + " ")
        if kind == "confirm":
            return input(text + " [y/N] ").strip().lower() in ("y", "yes", "j", "ja")
        if kind == "open_url":
            print(text, prompt.get("url", ""), file=sys.stderr)
            return True
        return input(text + " ")
    except (EOFError, KeyboardInterrupt):
        return None


def greeting(session):
    claims = session.get("claims") or {}
    name = claims.get("name") or session.get("account", "?")
    org = claims.get("org_name") or claims.get("org")
    roles = claims.get("roles") or claims.get("role")
    role = ",".join(roles) if isinstance(roles, list) else roles
    if not org and not role:
        return "Hello, %s" % name
    return "Hello, %s (%s/%s)" % (name, org or "-", role or "-")


def main(argv=None):
    parser = argparse.ArgumentParser(description="Greet the user with their SessionVault session.")
    parser.add_argument("--account", help="which account (needed when there are several)")
    parser.add_argument("--interactive", action="store_true", help="let the vault ask for the PIN here")
    parser.add_argument("--socket", help="vaultd's socket (default: $SESSIONVAULT_SOCKET, ...)")
    args = parser.parse_args(argv)
    try:
        with VaultClient(args.socket, on_prompt=ask_on_terminal if args.interactive else None, timeout=150) as vault:
            vault.hello("example-app", lang=language(), interactive=args.interactive)
            session = vault.session(args.account)
    except VaultError as e:
        print(e.message or e.code)
        return 1
    print(greeting(session))
    return 0


if __name__ == "__main__":
    sys.exit(main())
