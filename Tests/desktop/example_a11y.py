#!/usr/bin/python3
"""clients/python/example_gtk.py as a screen reader sees it (AT-SPI), when the vault
cannot be reached: the window's title, the sentence (in bokmål) and the button that
asks again all have names, and the button takes keyboard focus.

Run inside a private session bus on an X display (DesktopPromptTests does):
    dbus-run-session -- /usr/bin/python3 example_a11y.py
Prints "CHECK <ok|FAIL> <what>" lines and exits 1 if any failed.
"""
import os
import subprocess
import sys
import tempfile
import time

import pyatspi
from atspi_wait import Checks, all_nodes, wait_for_registry

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(os.path.dirname(os.path.dirname(HERE)), "clients", "python", "example_gtk.py")
check = Checks()


def main():
    launcher = subprocess.Popen(["/usr/libexec/at-spi-bus-launcher", "--launch-immediately"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    check(wait_for_registry(), "the accessibility registry answers")
    missing = os.path.join(tempfile.mkdtemp(prefix="sv-app-a11y-"), "no-vault.sock")
    app = subprocess.Popen(["/usr/bin/python3", APP, "--socket", missing], stdout=subprocess.PIPE, text=True,
                           env=dict(os.environ, LANG="nb_NO.UTF-8", LC_ALL="nb_NO.UTF-8"))
    try:
        said = app.stdout.readline().strip()
        check(said.startswith("Hvelvet (SessionVault) kjører ikke."), "the app says it in bokmål: %r" % said)
        found = []
        end = time.time() + 30
        while time.time() < end:
            found = [n for a in pyatspi.Registry.getDesktop(0) if a is not None and a.name == "example_gtk.py"
                     for n in all_nodes(a)]
            if any(n.getRoleName() == "push button" for n in found):
                break
            time.sleep(0.3)
        roles = [(n.getRoleName(), n.name) for n in found]
        print("TREE %r" % roles, flush=True)
        check(("frame", "Aktivitetslogg") in roles, "the window is named")
        check(any(r == "status bar" and name == said for r, name in roles), "the sentence is read (a status line)")
        buttons = [n for n in found if n.getRoleName() == "push button"]
        check([b.name for b in buttons] == ["Prøv igjen"], "the button has its name: %r" % [b.name for b in buttons])
        check(bool(buttons) and buttons[0].getState().contains(pyatspi.STATE_FOCUSABLE), "the button takes keyboard focus")
    finally:
        app.kill()
        launcher.terminate()
    print("app-a11y: %d failed" % check.failed, flush=True)
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
