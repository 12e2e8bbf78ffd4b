#!/usr/bin/python3
"""clients/settings/sessionvault-settings as a person with a screen reader uses it (AT-SPI).

Run inside a private session bus on an X display (DesktopPromptTests does):
    dbus-run-session -- /usr/bin/python3 settings_a11y.py
with DISPLAY, VAULTD, VAULTCTL and VAULT_FPSTUB set; or on a Wayland compositor
alone (WAYLAND_DISPLAY, no DISPLAY), where the keys go through GNOME's mutter
(wayland_keys.py, REMOTE_DESKTOP_BUS naming its bus) or, elsewhere, the
organization's choice, which needs the keyboard, is only read.

A real vaultd with the stub fingerprint reader and the scripted pinentry
(Tests/pinentry/fake-pinentry: vaultd's own dialogs, answered by the script), a
session imported by vaultctl (which so is an allowed app). The window is read
and used only through the accessibility tree, in bokmål: every button has a
name; "Lag PIN-kode" sets a PIN in vaultd's dialog (the window never sees it),
"Slå på" turns fingerprint login on, "Fjern PIN-kode" answered No changes
nothing (and the window says so), "Fjern" removes vaultctl's grant, "Logg
ut" logs Kari out; after each, the window says so and vaultd agrees. Prints
"CHECK <ok|FAIL> <what>" lines and exits 1 if any failed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pyatspi
import wayland_keys
from atspi_wait import Checks, all_nodes, wait_for_registry

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
APP = os.path.join(ROOT, "clients", "settings", "sessionvault-settings")
FAKE_PINENTRY = os.path.join(ROOT, "Tests", "pinentry", "fake-pinentry")
PIN = "482915"
check = Checks()
WAYLAND = bool(os.environ.get("WAYLAND_DISPLAY")) and not os.environ.get("DISPLAY")
# The keyboard on Wayland: mutter's RemoteDesktop (set in main), None elsewhere.
KEYS = None


def keypress(spec):
    """A key pressed and released, named as xdotool names it ("Tab", "Return")."""
    wayland_keys.press(KEYS, spec)


def window():
    """Everything showing in the settings window (found by its title)."""
    for app in pyatspi.Registry.getDesktop(0):
        if app is None:
            continue
        found = all_nodes(app)
        if any(n.getRoleName() == "frame" and n.name == "SessionVault" for n in found):
            return found
    return []


def wait_for(what, predicate, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        found = window()
        if predicate(found):
            return found
        time.sleep(0.3)
    found = window()
    print("TREE %s" % json.dumps(texts(found), ensure_ascii=False), flush=True)
    check(False, "in time: %s" % what)
    return found


def name(node):
    try:
        return node.name
    except Exception:   # gone since it was listed
        return ""


def texts(found):
    return [name(n) for n in found if name(n)]


def press(found, label, nth=0):
    buttons = [n for n in found if name(n) == label and n.getRoleName() == "push button"]
    check(len(buttons) > nth, "a button named %r is there" % label)
    if len(buttons) > nth:
        action = buttons[nth].queryAction()
        action.doAction(0)


def window_active():
    """Whether the settings window has the keyboard (GTK 4 says STATE_ACTIVE on its frame)."""
    for n in window():
        try:
            if n.getRoleName() == "frame" and n.name == "SessionVault":
                return n.getState().contains(pyatspi.STATE_ACTIVE)
        except Exception:
            pass
    return False


def focused():
    """(role, name) of what has the keyboard focus in the settings window."""
    for n in window():
        try:
            if n.getState().contains(pyatspi.STATE_FOCUSED):
                return n.getRoleName(), name(n)
        except Exception:
            pass
    return None


def organization(work, base_env):
    """A member of two organizations (the demo's Ola) who said Cancel when vaultd
    asked which one: the window reads "Organisasjon" as a named combo box showing
    "Ikke valgt"; it is reached with Tab alone, Enter opens the list of
    both, and Down, Down, Enter chooses Mentorhuset Oslo, which vaultd then
    gives the apps. (On X by xdotool, on GNOME's mutter by its RemoteDesktop;
    on another Wayland compositor only read.)"""
    socket_path = os.path.join(work, "run-demo", "vault.sock")
    config = os.path.join(work, "demo.toml")
    with open(config, "w") as f:
        f.write('tpm = "off"\n[fingerprint]\nreader = "none"\n')
    env = dict(base_env, SESSIONVAULT_SOCKET=socket_path)
    env.pop("SESSIONVAULT_PINENTRY", None)
    log = open(os.path.join(work, "vaultd-demo.log"), "w")
    vaultd = subprocess.Popen([os.environ["VAULTD"], "--demo", "--keyring=file", "--data-dir", os.path.join(work, "data-demo"),
                               "--socket", socket_path, "--config", config], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    settings = None
    try:
        for _ in range(100):
            if os.path.exists(socket_path):
                break
            time.sleep(0.1)
        ctl = [os.environ["VAULTCTL"]]
        r = subprocess.run(ctl + ["login", "bankid", "--browser", os.path.join(ROOT, "scripts", "demo-browser")], input="",
                           capture_output=True, text=True, env=dict(env, TEST_USER="ola"))
        check(r.returncode == 0 and "more than one organization" in r.stderr,
              "organization: Ola logged in and was asked which organization, and said Cancel (exit %d)" % r.returncode)
        settings = subprocess.Popen(["/usr/bin/python3", APP], env=dict(env, LANG="nb_NO.UTF-8", GSK_RENDERER="cairo"),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        found = wait_for("the window shows Ola's organization row",
                         lambda f: any(n.getRoleName() == "combo box" and name(n) == "Organisasjon" for n in f))
        check("Ikke valgt" in texts(found), "organization: a combo box named Organisasjon reads Ikke valgt")
        if WAYLAND and KEYS is None:
            return  # nothing here can type into a window on this Wayland compositor (xdotool is X11's)
        if WAYLAND:
            # The compositor gives the keyboard to the new window (or the keys below go nowhere).
            end = time.time() + 15
            while not window_active() and time.time() < end:
                time.sleep(0.2)
            check(window_active(), "organization: the window has the keyboard when it opens")
        for _ in range(40):
            if focused() == ("combo box", "Organisasjon"):
                break
            keypress("Tab")
            time.sleep(0.2)
        check(focused() == ("combo box", "Organisasjon"), "organization: Tab alone reaches it (%r)" % (focused(),))
        keypress("Return")
        found = wait_for("Enter opens the list of organizations", lambda f: "Mentorhuset Oslo" in texts(f))
        check("Likepersonsnettverket Bergen" in texts(found) and "Mentorhuset Oslo" in texts(found),
              "organization: Enter opens it, and both organizations are read")
        for key in ("Down", "Down", "Return"):
            keypress(key)
            time.sleep(0.4)
        claims = {}
        for _ in range(50):
            out = subprocess.run(ctl + ["token", "--json"], capture_output=True, text=True, env=env).stdout
            claims = json.loads(out or "{}").get("claims", {})
            if claims.get("org_name") == "Mentorhuset Oslo":
                break
            time.sleep(0.2)
        check(claims.get("org_name") == "Mentorhuset Oslo" and claims.get("roles") == ["peer_mentor"],
              "organization: Down, Down, Enter chose Mentorhuset Oslo, and the apps get it with its roles (%r)"
              % {k: claims.get(k) for k in ("org", "org_name", "roles")})
    finally:
        if settings is not None:
            settings.kill()
            settings.communicate(timeout=10)
        vaultd.terminate()
        vaultd.wait(10)
        log.close()


def main():
    work = tempfile.mkdtemp(prefix="sv-settings-")
    launcher = subprocess.Popen(["/usr/libexec/at-spi-bus-launcher", "--launch-immediately"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    check(wait_for_registry(), "the accessibility registry answers")
    global KEYS
    if WAYLAND and os.environ.get("REMOTE_DESKTOP_BUS"):
        # GNOME's compositor: its keyboard plugged in before any window opens (wayland_keys.connect).
        KEYS = wayland_keys.connect()
        check(KEYS is not None, "Wayland: mutter's RemoteDesktop takes keys")
    socket_path = os.path.join(work, "run", "vault.sock")
    reader = os.path.join(work, "fpstub.json")
    script = os.path.join(work, "pinentry-script")
    open(script, "w").close()
    config = os.path.join(work, "config.toml")
    with open(config, "w") as f:
        # A TPM device that is not there, whatever this machine has: the sentence is known.
        f.write('per_app = true\nprompt_timeout = 30\ntpm = "auto"\ntpm_device = "device:%s/no-tpm"\n' % work)
        f.write('[pin]\nargon_memory_mib = 8\nargon_ops = 1\n'
                '[fingerprint]\nreader = "stub"\nallow_stub_reader = true\nstub_state = "%s"\nscan_timeout = 5\n' % reader)
    env = dict(os.environ, HOME=work, SESSIONVAULT_SOCKET=socket_path, SESSIONVAULT_PINENTRY=FAKE_PINENTRY,
               FAKE_PINENTRY_SCRIPT=script, FAKE_PINENTRY_LOG=os.path.join(work, "pinentry.log"),
               SESSIONVAULT_SYSTEM_CONFIG=os.path.join(work, "no-system-config.toml"))
    for key in ("LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        env.pop(key, None)
    fpstub = [os.environ["VAULT_FPSTUB"], "--state", reader]
    subprocess.run(fpstub + ["plug"], check=True, env=env)
    subprocess.run(fpstub + ["enroll-finger", "right-index"], check=True, env=env)
    vaultd_log = open(os.path.join(work, "vaultd.log"), "w+")
    vaultd = subprocess.Popen([os.environ["VAULTD"], "--keyring=file", "--data-dir", os.path.join(work, "data"),
                               "--socket", socket_path, "--config", config], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=vaultd_log)
    settings = None
    ctl = [os.environ["VAULTCTL"]]
    try:
        for _ in range(100):
            if os.path.exists(socket_path):
                break
            time.sleep(0.1)
        r = subprocess.run(ctl + ["import", "--issuer", "https://idp.example.test", "--client-id", "settings",
                                  "--account", "kari", "--name", "Kari Nordmann", "--non-interactive"],
                           input=json.dumps({"access_token": "AT-settings", "expires_at": int(time.time()) + 3600}),
                           capture_output=True, text=True, env=env)
        check(r.returncode == 0, "vaultctl imported a session: %s" % r.stderr.strip())
        settings = subprocess.Popen(["/usr/bin/python3", APP], env=dict(env, LANG="nb_NO.UTF-8", GSK_RENDERER="cairo"),
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        found = wait_for("the window shows Kari's account", lambda f: "Kari Nordmann" in texts(f))
        shown = texts(found)
        print("READ %s" % json.dumps(shown, ensure_ascii=False), flush=True)
        for heading in ("Opplåsing", "Kontoer", "Apper som får bruke innloggingen din"):
            check(heading in shown, "the heading %r is read" % heading)
        check("PIN-kode er ikke satt opp" in shown, "the PIN's state is read in the seeds' words")
        check("Fingeravtrykk er ikke satt opp" in shown, "the fingerprint's state is read")
        check(any(t.startswith("Fant ingen sikkerhetsbrikke (TPM)") for t in shown),
              "what this computer's security chip does for the vault is read")
        unnamed = [n.getRoleName() for n in found if n.getRoleName() in ("push button", "toggle button") and not name(n)]
        check(not unnamed, "every button has a name (%r)" % unnamed)

        # A PIN, typed twice in vaultd's own dialog; the window only waits.
        with open(script, "w") as f:
            f.write("pin %s\n" % PIN)
        press(found, "Lag PIN-kode")
        found = wait_for("the PIN is on", lambda f: "PIN-kode er slått på" in texts(f))
        check("Ferdig." in texts(found), "the window says it is done")
        log = open(os.path.join(work, "pinentry.log")).read()
        check("SETREPEAT" in log, "vaultd's dialog asked for the new PIN twice")

        # Fingerprint login: one scan at the stub reader.
        subprocess.run(fpstub + ["next", "match", "right-index"], check=True, env=env)
        press(found, "Slå på")
        found = wait_for("fingerprint login is on", lambda f: "Fingeravtrykk er slått på" in texts(f))
        status = subprocess.run(ctl + ["status"], capture_output=True, text=True, env=env).stdout
        check("Fingerprint enabled" in status and "PIN enabled" in status, "vaultd agrees: %r" % status)

        # Remove PIN, then No in vaultd's question (after the PIN in use): the window says that
        # nothing was changed, not the unlock's "choose another way to log in".
        with open(script, "w") as f:
            f.write("pin %s\nnotok\n" % PIN)
        press(found, "Fjern PIN-kode")
        found = wait_for("the window says that nothing was changed",
                         lambda f: "Ingenting ble endret. Du kan prøve igjen når du vil." in texts(f))
        check("PIN-kode er slått på" in texts(found), "the PIN is still on in the window")
        status = subprocess.run(ctl + ["status"], capture_output=True, text=True, env=env).stdout
        check("PIN enabled" in status, "vaultd agrees: %r" % status)

        # vaultctl imported the session, so it may use it; Remove takes that back.
        found = wait_for("vaultctl is listed as an allowed app, by its name, for Kari by her name",
                         lambda f: "Får bruke: Kari Nordmann" in texts(f) and "vaultctl" in texts(f))
        press(found, "Fjern: vaultctl")  # named for a screen reader, as the row names the app
        found = wait_for("no app is allowed any more", lambda f: any(t.startswith("Ingen app har fått lov") for t in texts(f)))
        apps = subprocess.run(ctl + ["apps", "--json"], capture_output=True, text=True, env=env).stdout
        check('"apps":[]' in apps.replace(" ", ""), "vaultd agrees: %s" % apps.strip())

        # Log out: the account goes, in the window and in vaultd.
        press(found, "Logg ut: Kari Nordmann")  # says whom, for a screen reader
        # The page is redrawn whole: wait for the new one, not for a half-drawn one.
        found = wait_for("Kari is logged out and the window says nobody is logged in",
                         lambda f: "Kari Nordmann" not in texts(f)
                         and any(t.startswith("Du er ikke logget inn") for t in texts(f)))
        sessions = subprocess.run(ctl + ["sessions", "--json"], capture_output=True, text=True, env=env).stdout
        check("kari" not in sessions, "vaultd agrees: %s" % sessions.strip())
        settings.kill()
        settings.communicate(timeout=10)
        settings = None
        organization(work, env)
    finally:
        if settings is not None:
            settings.kill()
            out = settings.communicate(timeout=10)[0]
            if check.failed:
                print("SETTINGS " + out.replace("\n", "\nSETTINGS "), flush=True)
        vaultd.terminate()
        vaultd.wait(10)
        if check.failed:
            vaultd_log.seek(0)
            for line in vaultd_log:
                print("VAULTD " + line.rstrip(), flush=True)
        vaultd_log.close()
        if KEYS is not None:
            KEYS.close()
        launcher.terminate()
        shutil.rmtree(work, ignore_errors=True)
    print("settings-a11y: %d failed" % check.failed, flush=True)
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
