#!/usr/bin/python3
"""What Orca itself says for vaultd's own dialog, end to end.

Run inside a private session bus on an X display (DesktopPromptTests does):
    dbus-run-session -- /usr/bin/python3 orca_speech.py
with DISPLAY, VAULTD, VAULTCTL and VAULT_FPSTUB set, and PINENTRY (SessionVault's
own dialog, clients/dialog/sessionvault-pinentry, by default).

dialog_a11y.py reads the dialog's accessible tree as a screen reader would; this
runs the screen reader. Orca 43 (Debian's `orca`) starts on the accessibility
bus with no desktop, no sound card and no settings of the person's: a temporary
HOME, speech-dispatcher with its `dummy` output module (its sound goes to
libao's null driver), and what Orca speaks read from Orca's own speech log (the
one its regression tests read: one "SPEECH OUTPUT: '...'" line an utterance).
Orca runs in English, then in Norwegian bokmål (Orca itself in bokmål, so its
role names are too). A vaultd with the demo providers and the stub fingerprint
reader, a locked vault, an app asking for its session with prompter "vault".
In each language, every dialog kind: the PIN dialog (what Orca says when it
appears, for each Tab, in bokmål after a wrong PIN; the PIN typed); the app-grant
dialog (another app asks); the choice of login; the offer of fingerprint login
after a login in the scripted browser (on a vault of its own); a new PIN typed
twice, differently first, and the message after it; Start over's yes/no question;
the fingerprint's wait; and the settings app walked with Tab. Nothing is pressed
before Orca has said what is checked, and each wait for it has a timeout. Prints
what Orca said ("<lang> SPEECH OUTPUT: '...'", never a PIN nor a digit said
alone), one "CHECK <ok|FAIL> <what>" line per check, and "orca: N failed"; exits
1 if any failed. Debian's /usr/bin/python3: pyatspi comes from python3-pyatspi.
On GNOME's Wayland compositor alone (WAYLAND_DISPLAY and no DISPLAY; mutter, with
REMOTE_DESKTOP_BUS naming the bus of its RemoteDesktop interface) the dialog and
the settings app are GTK on Wayland and the keys are typed through mutter
(wayland_keys.py), not xdotool; all of the above runs there too, but for one
check: Orca+KP_Enter in the settings app (Orca 43 hears no key there, below).
ORCA_DEBUG=FILE keeps Orca's full debug log in FILE.en and FILE.nb, to find why
a check failed: it holds every event Orca heard, so read it, do not publish it.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import wayland_keys
from atspi_wait import Checks, wait_for_registry
from dialog_a11y import another_app_asks, demo_browser_path, enroll_pin_and_import, in_background, start_vaultd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PINENTRY = os.environ.get("PINENTRY", os.path.join(ROOT, "clients", "dialog", "sessionvault-pinentry"))
SETTINGS = os.path.join(ROOT, "clients", "settings", "sessionvault-settings")
PIN = "582946"
WRONG_PIN = "000000"
# A new PIN typed differently in its two fields.
FIRST, SECOND = "111111", "222222"
TYPED = (PIN, WRONG_PIN, FIRST, SECOND)
check = Checks()
# GNOME's compositor alone: no X display, the keys go through mutter (KEYS, set in main).
WAYLAND = bool(os.environ.get("WAYLAND_DISPLAY")) and not os.environ.get("DISPLAY")
KEYS = None

# Orca as /usr/bin/orca starts it, with two things added from outside. What it
# speaks is also written to the file named first, a line an utterance, by Orca's
# own "speech" logger (kept for its regression tests): --debug-file writes the
# same lines, but block-buffered, so the last thing said could wait unread.
# And another Orca of the same user (the developer's own, on their desktop) does
# not keep this one from starting; this one runs on its own private buses.
# On Wayland with no X server at all (mutter --no-x11) Orca 43 needs X twice:
# at start it keeps the X keymap with xkbcomp, to make Insert its Orca key,
# reading DISPLAY (unset, Orca stops there); and once a GTK 4 window has the
# focus it asks libatspi 2.46 for a key device (Atspi.Device.new): with
# WAYLAND_DISPLAY set that is the "legacy" one, whose init hands the display
# XOpenDisplay returned (NULL here) to XkbKeysymToModifiers and crashes (fixed in
# at-spi2-core 2.61, 5fb34d42); Orca's Python SIGSEGV handler cannot run inside
# C, so the fault repeats and Orca hangs, silent. Here Orca is left without its
# Orca key and keeps its older key listener (the registry's). Either way Orca 43
# hears no key of a GTK 4 window on Wayland: the registry is told of keys only
# by toolkits that forward them (GTK 2/3's bridge; GTK 4 does not), and mutter
# 43 hands a Wayland window its keys without Clutter's emission, where GNOME
# Shell's snooper would see them. With an X display beside mutter, as
# Xwayland is in a GNOME session, Orca does not hang but still hears nothing:
# no echo of keys, and Insert+KP_Enter reached the settings app as keys (it
# pressed the focused button). So no Orca command works in the dialog or the
# settings app on GNOME's Wayland with Orca 43; what Orca says of focus and
# events (all the rest) is unchanged.
LAUNCH_ORCA = r"""
import logging, os, runpy, sys

class OneLine(logging.Formatter):
    def format(self, record):
        return " ".join(record.getMessage().splitlines())

log = logging.FileHandler(sys.argv[1], encoding="utf-8")
log.setFormatter(OneLine())
logging.getLogger("speech").addHandler(log)
if len(sys.argv) > 3:
    from orca import debug
    debug.debugLevel, debug.eventDebugLevel = debug.LEVEL_ALL, debug.LEVEL_OFF
    debug.debugFile = open(sys.argv[3], "w", buffering=1)
orca = runpy.run_path("/usr/bin/orca", run_name="orca_launcher")
orca["main"].__globals__["otherOrcas"] = lambda: []
if "DISPLAY" not in os.environ:
    from orca import orca as core
    for name in ("_storeXmodmap", "_createOrcaXmodmap", "_restoreXmodmap"):
        setattr(core, name, lambda *args: None)
    core._eventManager.forceLegacyKeyHandling = True
sys.argv = ["orca", "--user-prefs", sys.argv[2]]
sys.exit(orca["main"]())
"""
# An utterance; a key's echo has its voice after it ("SPEECH OUTPUT: 'tab ' {'established': False}").
SAID = re.compile(r"^SPEECH OUTPUT: '(.*?)'(?: \{.*\})?$")

# What Orca says, by the language it runs in: its own words (role names come from
# AT-SPI's translations) and the dialog's and the settings app's, which are vaultd's.
WORDS = {
    "en": {"dialog": "dialog", "button": "push button", "password": "password text",
           "app": "wants to use your login", "type": "Enter your PIN:", "field": "PIN:",
           "cancel": "Cancel", "ok": "OK",
           "grant": "Allow ‘kalender’ to use your", "allow": "Allow", "grant_others": ("Deny", "Only this time"),
           "grant_key": "alt+o", "grant_answer": {"token": "AT-orca"},
           "login": "Log in with Demo BankID / Demo Vipps", "provider": "Use Demo BankID",
           "login_others": ("Cancel", "Use Demo Vipps"),
           "offer": "Turn on fingerprint login?", "turn_on": "Turn on", "offer_others": ("Cancel", "Not now"),
           "offer_key": "alt+n", "offer_answer": "Not now",
           "current_pin": "first enter the PIN you use now", "choose": "Choose a PIN",
           "again": "Type the same PIN again:", "again_key": "alt+t",
           "mismatch": "The two PINs were not the same. Let's start again.",
           "pin_set": "PIN is set up.", "close": "Close",
           "start_over": "Start over?", "no": "No", "confirm_others": ("Cancel", "Yes"),
           "touch": "Touch the fingerprint reader", "use_pin": "Use PIN instead",
           "title_key": "Insert+KP_Enter",
           "lock": "Lock", "unlock": "Unlock methods", "fingerprint_on": "Fingerprint enabled",
           "fingerprint_buttons": ("Set up again", "Turn off"), "pin_on": "PIN enabled",
           "pin_buttons": ("Change PIN", "Remove PIN"), "not_selected": "not selected", "frame": "frame"},
    "nb": {"dialog": "dialog", "button": "trykknapp", "password": "passordtekst",
           "app": "vil bruke innloggingen din", "type": "Skriv inn PIN-koden:", "field": "PIN-kode:",
           "cancel": "Avbryt", "ok": "OK", "wrong": "Det stemte ikke",
           "grant": "Vil du la «kalender» bruke", "allow": "Tillat", "grant_others": ("Avslå", "Bare denne gangen"),
           "grant_key": "alt+a", "grant_answer": {"error": "app_not_allowed"},
           "login": "Logg inn med Demo BankID / Demo Vipps", "provider": "Bruk Demo BankID",
           "login_others": ("Avbryt", "Bruk Demo Vipps"),
           "offer": "Slå på innlogging med fingeravtrykk?", "turn_on": "Slå på", "offer_others": ("Avbryt", "Ikke nå"),
           "offer_key": "alt+i", "offer_answer": "Ikke nå",
           "current_pin": "skriv først inn PIN-koden du bruker nå", "choose": "Velg en PIN-kode",
           "again": "Skriv den samme PIN-koden en gang til:", "again_key": "alt+s",
           "mismatch": "De to PIN-kodene var ikke like. Vi begynner på nytt.",
           "pin_set": "PIN-kode er satt opp.", "close": "Lukk",
           "start_over": "Begynne på nytt?", "no": "Nei", "confirm_others": ("Avbryt", "Ja"),
           "touch": "Berør fingeravtrykkleseren", "use_pin": "Bruk PIN-kode i stedet",
           "title_key": "Insert+KP_Enter",
           "lock": "Lås", "unlock": "Opplåsing", "fingerprint_on": "Fingeravtrykk er slått på",
           "fingerprint_buttons": ("Sett opp på nytt", "Slå av"), "pin_on": "PIN-kode er slått på",
           "pin_buttons": ("Bytt PIN-kode", "Fjern PIN-kode"), "not_selected": "ikke valgt", "frame": "ramme"},
}


class Speech:
    """What one Orca has spoken: its speech log, read up to where the test has heard."""

    def __init__(self, path, lang):
        self.path, self.lang, self.heard = path, lang, 0

    def lines(self):
        try:
            with open(self.path, encoding="utf-8") as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def until(self, predicate, timeout=15):
        """The utterances spoken since the last call, up to the first that `predicate`
        accepts (waiting for it), printed; all of them when none did within `timeout`."""
        end = time.time() + timeout
        while True:
            new = self.lines()[self.heard:]
            for i, line in enumerate(new):
                m = SAID.match(line)
                if m and predicate(m.group(1)):
                    return self.take(new[:i + 1])
            if time.time() > end:
                return self.take(new)
            time.sleep(0.1)

    def rest(self, settle=1.0):
        """Whatever is spoken until Orca has been quiet for `settle` seconds."""
        count, quiet_since = len(self.lines()), time.time()
        while time.time() - quiet_since < settle:
            time.sleep(0.1)
            now = len(self.lines())
            if now != count:
                count, quiet_since = now, time.time()
        return self.take(self.lines()[self.heard:])

    def take(self, lines):
        self.heard += len(lines)
        said = []
        for line in lines:
            m = SAID.match(line)
            if m:
                said.append(m.group(1))
            # A check fails if a PIN, or a digit as it was typed, was ever spoken; neither is printed.
            if m and m.group(1).strip().isdigit():
                line = "SPEECH OUTPUT: '[a digit]'"
            for typed in TYPED:
                line = line.replace(typed, "[PIN]")
            print("%s %s" % (self.lang, line), flush=True)
        return said


class Orca:
    """Orca, started on this session's accessibility bus in `lang`; stop() ends it."""

    def __init__(self, work, env, lang):
        self.speech = Speech(os.path.join(work, "orca-speech-%s.log" % lang), lang)
        args = ["/usr/bin/python3", "-c", LAUNCH_ORCA, self.speech.path, os.path.join(work, "orca-" + lang)]
        if os.environ.get("ORCA_DEBUG"):
            args.append("%s.%s" % (os.environ["ORCA_DEBUG"], lang))
        self.output = open(os.path.join(work, "orca-%s.out" % lang), "w+")
        self.process = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=self.output, stderr=subprocess.STDOUT)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.speech.rest(0)

    def why(self):
        """What Orca printed, for a check that failed (it holds no PIN: Orca is not told one)."""
        self.output.seek(0)
        return self.output.read()[-2000:]


def buttons_said(said, button):
    """The buttons among what Orca said ("Deny push button." -> "Deny")."""
    return {t[:t.index(" " + button)] for t in said if (" " + button) in t}


def question(orca, lang, tag, asks, focused, others, timeout=15, listen=0.0):
    """A dialog with buttons, heard as it appears: Orca names it ("SessionVault
    dialog") with what it asks (`asks`, each said), then the focused button;
    Tab after Tab says each of the `others` by name and role. Nothing is pressed
    until the focused button was said, and `listen` seconds more (the person
    hears the question out)."""
    w = WORDS[lang]
    said = orca.speech.until(lambda s: s.startswith(focused + " " + w["button"]), timeout=timeout)
    time.sleep(listen)
    check(any(("SessionVault " + w["dialog"]) in s and all(a in s for a in asks) for s in said),
          "%s: %s: when it appears, Orca names the dialog and says what it asks (%r)" % (lang, tag, asks[-1]))
    check(any(s.startswith(focused + " " + w["button"]) for s in said),
          "%s: %s: and the focused button (%r)" % (lang, tag, focused + " " + w["button"]))
    heard = set()
    for _ in others:
        key("Tab")
        heard |= buttons_said(orca.speech.until(lambda s: (" " + w["button"]) in s, timeout=10), w["button"])
    check(heard == set(others), "%s: %s: Tab%s: Orca says %s, each a %s (%r)"
          % (lang, tag, ", Tab" * (len(others) - 1), " and ".join(repr(o) for o in others), w["button"], sorted(heard)))


def grant(orca, lang, work, socket_path, env):
    """The app-grant dialog, heard with Orca: another app ("kalender") asks for Kari's
    session; Orca says what it asks and Allow, Tab says the other two; the answer by
    its mnemonic (English: Alt+O, Only this time; bokmål: Alt+A, Avslå)."""
    w = WORDS[lang]
    app = another_app_asks(work, socket_path, env, lang)
    # The dialog takes no key for its first second (a key then was meant for another
    # window): the person hears the question out first, as Orca says it.
    question(orca, lang, "grant", [w["grant"]], w["allow"], w["grant_others"], listen=1.1)
    key(w["grant_key"])
    try:
        got = app.communicate(timeout=40)[0].strip()
    except subprocess.TimeoutExpired:
        app.kill()
        got = app.communicate()[0].strip()
    check(got == json.dumps(w["grant_answer"]), "%s: grant: %s answered %r (%r)" % (lang, w["grant_key"], w["grant_answer"], got))
    orca.speech.rest(0.5)


def offer(orca, lang, work, config, env, fpstub):
    """The offer of fingerprint login after a first login, heard with Orca, on a vault
    of its own (vaultd keeps a Not now across restarts: each language's offer is a
    first one): the stub reader has a finger; a login at Demo BankID in the scripted
    browser; Orca says the offer and Turn on, Tab says Cancel and Not now; Not now's
    mnemonic (Alt+N / Alt+I) answers it at once."""
    w = WORDS[lang]
    for step in (["plug"], ["enroll-finger", "right-index-finger"]):
        subprocess.run(fpstub + step, capture_output=True, env=env)
    here = os.path.join(work, "offer-" + lang)
    socket_path = os.path.join(here, "vault.sock")
    with open(os.path.join(work, "vaultd-offer-%s.log" % lang), "w") as log:
        vaultd = start_vaultd(["--demo"], os.path.join(here, "data"), socket_path, config, env, log)
        try:
            t, result = in_background(socket_path, "aktivitetslogg", "login", lang=lang, provider="bankid")
            # The login runs in the scripted browser first (as long as 30 s on a loaded machine, as dialog_a11y allows).
            question(orca, lang, "offer", [w["offer"]], w["turn_on"], w["offer_others"], timeout=30)
            key(w["offer_key"])
            t.join(10)
            answered = not t.is_alive()
            t.join(30)
            check(answered and result.get("result", {}).get("account") is not None,
                  "%s: offer: %s answered %r and the app has its session, at once (%r)"
                  % (lang, w["offer_key"], w["offer_answer"], result.get("error")))
        finally:
            vaultd.terminate()
            vaultd.wait(10)
    orca.speech.rest(0.5)


def confirm(orca, lang, socket_path):
    """A yes/no question, heard with Orca: Start over, as the settings app asks it;
    Orca says the question and No (Yes deletes everything, so No has the focus), Tab
    says the other two; Alt+N is No (Nei)."""
    w = WORDS[lang]
    t, result = in_background(socket_path, "settings", "reset", lang=lang)
    question(orca, lang, "confirm", [w["start_over"]], w["no"], w["confirm_others"])
    key("alt+n")
    t.join(40)
    check(result.get("error") == "cancelled",
          "%s: confirm: Alt+N answered %s, nothing deleted (%r)" % (lang, w["no"], result.get("error")))
    orca.speech.rest(0.5)


def x_window_manager(env):
    """mutter as the X display's window manager, as on GNOME on Xorg: it activates a
    new window as a desktop does, which is when Orca names it. The dialogs before it
    are walked with none (so each test of them stands on the dialog alone)."""
    wm = subprocess.Popen(["/usr/bin/mutter", "--x11", "--replace", "--sm-disable"], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        r = subprocess.run(["xprop", "-root", "_NET_SUPPORTING_WM_CHECK"], capture_output=True, text=True)
        if "window id" in r.stdout:
            break
        time.sleep(0.05)
    check("window id" in r.stdout, "X: mutter manages the display's windows")
    return wm


def settings_window(orca, lang, env):
    """The settings app, heard with Orca, opened as from a desktop's menu: on X with
    mutter as the window manager (as GNOME on Xorg; x_window_manager), on Wayland on
    mutter itself. As it opens, Orca says the window's name and then where the focus
    is; Tab after Tab (from wherever GTK put the focus at first: its scroll
    area, or the first row) says the Lock button, each unlock method's state with its
    heading and each of its buttons, in order, and no row "not selected"; then (on X)
    Orca+KP_Enter, Orca's "which window is this", names the window. Orca 43 with no X
    display hears no key of a GTK 4 window (LAUNCH_ORCA), so on mutter's Wayland no
    Orca command can ask."""
    w = WORDS[lang]
    wm = None if WAYLAND else x_window_manager(env)
    app = subprocess.Popen(["/usr/bin/python3", SETTINGS], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not WAYLAND:
            try:
                subprocess.run(["xdotool", "search", "--sync", "--onlyvisible", "--pid", str(app.pid), "windowfocus"],
                               capture_output=True, timeout=20)
            except subprocess.TimeoutExpired:
                pass  # no window: every check below fails
        lock = w["lock"] + " " + w["button"]
        last = w["pin_buttons"][1] + " " + w["button"]
        said = orca.speech.until(lambda s: s.startswith(lock), timeout=20)
        # Orca names a window as the window manager activates it; GTK 4.8 said so before
        # its objects were on the accessibility bus (4 openings of 7 named it), so the app
        # shows its window once they are (present_when_heard), and gives the first focus
        # again after that, so the name comes first.
        frame = "SessionVault " + w["frame"] + "."
        check(frame in said, "%s: settings: as the window opens, Orca says its name %r (%r)" % (lang, frame, said[:4]))
        check(any(t.startswith(lock) for t in said),
              "%s: settings: as the window opens, Orca says where the focus is: the Lock button (%r)" % (lang, said[:4]))
        check(frame in said and said.index(frame) < next((i for i, t in enumerate(said) if t.startswith(lock)), -1),
              "%s: settings: the window's name comes before the focus" % lang)
        for _ in range(12):
            key("Tab")
            said += orca.speech.until(lambda s: s.startswith(last) or (" " + w["button"]) in s
                                      or s.startswith((w["fingerprint_on"], w["pin_on"])), timeout=5)
            if any(s.startswith(last) for s in said):
                break
        heard = [t for t in said if t != "tab "]
        for tag, expected in (("the Lock button", [lock]),
                              ("the fingerprint's state, with its heading", [w["unlock"], w["fingerprint_on"]]),
                              ("the fingerprint's buttons", [b + " " + w["button"] for b in w["fingerprint_buttons"]]),
                              ("the PIN's state", [w["pin_on"]]),
                              ("the PIN's buttons", [b + " " + w["button"] for b in w["pin_buttons"]])):
            # Each in turn, after what came before it.
            at = [next((i for i, t in enumerate(heard) if t.startswith(e)), None) for e in expected]
            ok = None not in at and at == sorted(at)
            check(ok, "%s: settings: Tab on: Orca says %s (%s)" % (lang, tag, " ".join(repr(e) for e in expected)))
            heard = heard[at[-1] + 1:] if ok else heard
        # A row of settings is no choice in a list: Orca says "not selected" after any
        # list item in a list that offers selection, which every GTK 4.8 list box does.
        noise = [t for t in said if t.startswith(w["not_selected"])]
        check(not noise, "%s: settings: no row is said to be %r (heard %d times)" % (lang, w["not_selected"], len(noise)))
        if not WAYLAND:
            key(w["title_key"])
            # Exactly the title: a key Orca did not take would press the focused Remove PIN,
            # and vaultd's dialog that asks for the PIN is a "SessionVault dialog" too.
            said = orca.speech.until(lambda s: s == "SessionVault", timeout=10)
            check("SessionVault" in said, "%s: settings: Orca+KP_Enter: Orca names the window ('SessionVault')" % lang)
    finally:
        app.kill()
        app.wait(10)
        if wm is not None:
            wm.terminate()
            wm.wait(10)
            subprocess.run(["xprop", "-root", "-remove", "_NET_SUPPORTING_WM_CHECK"], capture_output=True)
    orca.speech.rest(0.5)


def dialog_running():
    """Whether a dialog program (PINENTRY) runs: vaultd starts one a dialog, and it
    ends once the dialog is answered (libadwaita hides the window at any key that
    answers, taken or not: the window gone shows nothing)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if PINENTRY.encode() in f.read():
                    return True
        except OSError:
            pass  # ended since it was listed
    return False


def wait_until(predicate, timeout):
    end = time.time() + timeout
    while not predicate():
        if time.time() > end:
            return False
        time.sleep(0.1)
    return True


def key(spec):
    wayland_keys.press(KEYS, spec)


def type_text(text):
    wayland_keys.type_into(KEYS, text)


def start_speech_dispatcher(env, run):
    """speech-dispatcher with no sound card: its dummy module, and libao's null driver
    for the sound (the dummy module plays a recorded message, and fails without a
    device to play it on). Returns once its socket is there, which Orca looks for."""
    conf = os.path.join(env["XDG_CONFIG_HOME"], "speech-dispatcher")
    os.makedirs(conf)
    with open(os.path.join(conf, "speechd.conf"), "w") as f:
        f.write('AudioOutputMethod "libao"\nAddModule "dummy" "sd_dummy" ""\nDefaultModule dummy\n')
    with open(os.path.join(env["HOME"], ".libao"), "w") as f:
        f.write("default_driver=null\n")
    spd = subprocess.Popen(["/usr/bin/speech-dispatcher", "--run-single", "--timeout", "0", "--log-level", "1"], env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    socket_path = os.path.join(run, "speech-dispatcher", "speechd.sock")
    end = time.time() + 15
    while time.time() < end and not os.path.exists(socket_path) and spd.poll() is None:
        time.sleep(0.1)
    check(os.path.exists(socket_path), "speech-dispatcher runs with its dummy module")
    return spd


def norwegian_locale(work):
    """A LOCPATH holding nb_NO.UTF-8, for Orca to run in bokmål (Debian generates only the
    locales chosen at install; localedef builds this one here, from the `locales` package)."""
    path = os.path.join(work, "locale")
    os.makedirs(path)
    r = subprocess.run(["localedef", "-i", "nb_NO", "-f", "UTF-8", os.path.join(path, "nb_NO.UTF-8")],
                       capture_output=True, text=True)
    made = os.path.isdir(os.path.join(path, "nb_NO.UTF-8"))
    check(made, "the nb_NO.UTF-8 locale for Orca in bokmål%s" % ("" if made else " (%s)" % r.stderr.strip()[-300:]))
    return path


def pin_dialog(orca, lang, socket_path, ctl, env):
    """One PIN dialog, heard with Orca: appears, Tab through it, (bokmål) a wrong PIN, the PIN."""
    w = WORDS[lang]
    subprocess.run(ctl + ["lock"], capture_output=True, env=env)
    t, result = in_background(socket_path, "aktivitetslogg", "session", lang=lang, account="kari")
    # Nothing is pressed until the field is spoken: all of this is said on its own.
    said = orca.speech.until(lambda s: s.startswith(w["field"] + " " + w["password"]))
    check(any(("SessionVault " + w["dialog"]) in s for s in said),
          "%s: when the dialog appears, Orca names it by its title (%r)" % (lang, "SessionVault " + w["dialog"]))
    check(any(w["app"] in s and w["type"] in s for s in said),
          "%s: and says who asks and what to type (%r)" % (lang, w["type"]))
    check(any(s.startswith(w["field"] + " " + w["password"]) for s in said),
          "%s: and the focused PIN field by its label (%r)" % (lang, w["field"] + " " + w["password"]))
    for name in (w["cancel"], w["ok"]):
        key("Tab")
        said = orca.speech.until(lambda s: s.startswith(name + " " + w["button"]), timeout=10)
        check(any(s.startswith(name + " " + w["button"]) for s in said),
              "%s: Tab: Orca says %r" % (lang, name + " " + w["button"]))
    key("Tab")
    said = orca.speech.until(lambda s: s.startswith(w["field"] + " " + w["password"]), timeout=10)
    check(any(s.startswith(w["field"] + " " + w["password"]) for s in said),
          "%s: Tab again: back in the PIN field (%r)" % (lang, w["field"] + " " + w["password"]))
    if "wrong" in w:
        # A wrong PIN: the dialog comes back with why, as an alert (dialog_a11y.py reads it).
        type_text(WRONG_PIN)
        key("Return")
        said = orca.speech.until(lambda s: w["wrong"] in s, timeout=15)
        check(any(w["wrong"] in s for s in said), "%s: after a wrong PIN Orca says why (%r)" % (lang, w["wrong"]))
        said = orca.speech.until(lambda s: s.startswith(w["field"] + " " + w["password"]), timeout=10)
    # A digit typed and taken back first (GTK 4.8's code sends what is deleted as it is, too).
    type_text("7")
    key("BackSpace")
    type_text(PIN)
    key("Return")
    t.join(40)
    check(result.get("result", {}).get("access_token") == "AT-orca",
          "%s: the PIN typed, Enter: the app got its session (%r)" % (lang, result.get("error")))
    orca.speech.rest()


def login_choice(orca, lang, socket_path):
    """The choice of login, heard with Orca: the first provider focused, Tab to the others, Escape."""
    w = WORDS[lang]
    t, result = in_background(socket_path, "aktivitetslogg", "login", lang=lang)
    question(orca, lang, "login", [w["login"]], w["provider"], w["login_others"])
    key("Escape")
    t.join(40)
    check(result.get("error") == "cancelled", "%s: login: Escape cancels it (%r)" % (lang, result.get("error")))
    orca.speech.rest()


def new_pin(orca, lang, socket_path):
    """A new PIN, heard with Orca: the PIN in use first, then the new one in two fields
    said by their labels, typed differently (Orca says why, with the first field), then
    alike (the same PIN again, so the next part finds it); then the message that it is
    set, and its one button. The second field joins the accessibility bus only when it
    is first used: its digits must not be spoken either."""
    w = WORDS[lang]
    field, again = w["field"] + " " + w["password"], w["again"] + " " + w["password"]
    hold = threading.Event()
    t, result = in_background(socket_path, "settings", "enroll", lang=lang, hold=hold, factor="pin")
    said = orca.speech.until(lambda s: s.startswith(field))
    check(any(w["current_pin"] in s for s in said),
          "%s: new PIN: Orca says to enter the PIN in use first (%r)" % (lang, w["current_pin"]))
    type_text(PIN)
    key("Return")
    said = orca.speech.until(lambda s: s.startswith(field))
    check(any(("SessionVault " + w["dialog"]) in s and w["choose"] in s for s in said) and said[-1].startswith(field),
          "%s: new PIN: then Orca says what to do and the first field by its label (%r)" % (lang, w["choose"]))
    type_text(FIRST)
    key(w["again_key"])
    said = orca.speech.until(lambda s: s.startswith(again), timeout=10)
    check(any(s.startswith(again) for s in said),
          "%s: new PIN: %s: Orca says the second field by its label (%r)" % (lang, w["again_key"], again))
    type_text(SECOND)
    key("Return")
    said = orca.speech.until(lambda s: s == w["mismatch"], timeout=10)
    check(said[-2:] == [field + ".", w["mismatch"]],
          "%s: new PIN: two different PINs: Orca says the first field and why (%r)" % (lang, said[-2:]))
    type_text(PIN)
    key(w["again_key"])
    orca.speech.until(lambda s: s.startswith(again), timeout=10)
    type_text(PIN)
    key("Return")
    # A message follows while the app stays connected ("PIN is set up."), one button.
    close = w["close"] + " " + w["button"]
    said = orca.speech.until(lambda s: s.startswith(close), timeout=15)
    check(result.get("result", {}).get("state") == "enabled",
          "%s: new PIN: typed twice alike, Enter: it is set (%r)" % (lang, result.get("error")))
    check(any(("SessionVault " + w["dialog"]) in s and w["pin_set"] in s for s in said),
          "%s: message: when it appears, Orca names the dialog and says it (%r)" % (lang, w["pin_set"]))
    check(any(s.startswith(close) for s in said), "%s: message: and its one button, focused (%r)" % (lang, close))
    key("Return")
    check(wait_until(lambda: not dialog_running(), timeout=10), "%s: message: Enter answers it, and the dialog ends" % lang)
    hold.set()
    t.join(40)
    orca.speech.rest()


def fingerprint_wait(orca, lang, socket_path, ctl, fpstub, env):
    """The fingerprint's wait, heard with Orca: appears; a scan (the stub reader's) ends it."""
    w = WORDS[lang]
    for step in (["plug"], ["enroll-finger", "right-index-finger"], ["next", "match", "right-index-finger"]):
        subprocess.run(fpstub + step, capture_output=True, env=env)
    r = subprocess.run(ctl + ["enroll", "fingerprint"], capture_output=True, text=True, env=env)
    check(r.returncode == 0, "%s: fingerprint: turned on with one scan (%s)" % (lang, r.stderr.strip()))
    subprocess.run(ctl + ["lock"], capture_output=True, env=env)
    t, result = in_background(socket_path, "aktivitetslogg", "session", lang=lang, account="kari")
    said = orca.speech.until(lambda s: s.startswith(w["use_pin"] + " " + w["button"]))
    check(any(("SessionVault " + w["dialog"]) in s and w["touch"] in s for s in said),
          "%s: fingerprint: when the wait appears, Orca names the dialog and says what to do (%r)" % (lang, w["touch"]))
    check(any(s.startswith(w["use_pin"] + " " + w["button"]) for s in said),
          "%s: fingerprint: and the focused way out (%r)" % (lang, w["use_pin"] + " " + w["button"]))
    subprocess.run(fpstub + ["next", "match", "right-index-finger"], capture_output=True, env=env)
    t.join(40)
    check(result.get("result", {}).get("access_token") == "AT-orca",
          "%s: fingerprint: a scan ended the wait and the app got its session (%r)" % (lang, result.get("error")))
    orca.speech.rest()


def main():
    work = tempfile.mkdtemp(prefix="sv-orca-")
    run = os.path.join(work, "run")
    os.makedirs(run, 0o700)
    home = os.path.join(work, "home")
    os.makedirs(home)
    if WAYLAND:
        # The compositor's socket by its path, for all this starts and the apps here that
        # name it in their hello: XDG_RUNTIME_DIR is this run's own from here on.
        os.environ["WAYLAND_DISPLAY"] = os.path.join(os.environ.get("XDG_RUNTIME_DIR", ""), os.environ["WAYLAND_DISPLAY"])
    # Nobody's settings: a HOME of its own, and GSettings in memory (Orca's switch
    # turning accessibility on is written there, not to the person's dconf).
    env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"),
               XDG_DATA_HOME=os.path.join(home, ".local", "share"), XDG_CACHE_HOME=os.path.join(home, ".cache"),
               XDG_RUNTIME_DIR=run, GSETTINGS_BACKEND="memory")
    for k in ("LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        env.pop(k, None)
    launcher = subprocess.Popen(["/usr/libexec/at-spi-bus-launcher", "--launch-immediately"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    check(wait_for_registry(), "the accessibility registry answers")
    global KEYS
    if WAYLAND:
        # Its keyboard plugged in before any dialog opens (wayland_keys.connect).
        KEYS = wayland_keys.connect()
        check(KEYS is not None, "Wayland: mutter's RemoteDesktop takes keys")
    spd = start_speech_dispatcher(env, run)
    locpath = norwegian_locale(work)

    socket_path = os.path.join(work, "vault", "vault.sock")
    config = os.path.join(work, "config.toml")
    stub_state = os.path.join(work, "fpstub.json")
    with open(config, "w") as f:
        f.write('pinentry = "%s"\nprompt_timeout = 30\n[fingerprint]\nreader = "stub"\nstub_state = "%s"\n'
                '[pin]\nargon_memory_mib = 64\n' % (PINENTRY, stub_state))
    vaultd_log = open(os.path.join(work, "vaultd.log"), "w+")
    # The demo providers (Demo BankID, Demo Vipps) for the choice of login; no browser is opened.
    # Its login page opened by the scripted browser, as Per (Kari's session is the one imported).
    vaultd_env = dict(env, PATH=demo_browser_path(work) + ":" + env.get("PATH", "/usr/bin:/bin"), TEST_USER="per")
    vaultd = start_vaultd(["--demo"], os.path.join(work, "data"), socket_path, config, vaultd_env, vaultd_log)
    fpstub = [os.environ["VAULT_FPSTUB"], "--state", stub_state]
    orca = None
    try:
        ctl = [os.environ["VAULTCTL"]]
        env["SESSIONVAULT_SOCKET"] = socket_path
        enroll_pin_and_import(socket_path, env, "orca", pin=PIN, checked=check)
        spoken = []
        for lang, locale in (("en", "C.UTF-8"), ("nb", "nb_NO.UTF-8")):
            orca = Orca(work, dict(env, LANG=locale, LOCPATH=locpath), lang)
            # Orca's first words are that it is on; from then on it listens.
            said = orca.speech.until(lambda s: True, timeout=30)
            check(bool(said), "%s: Orca started and spoke (%r)" % (lang, said))
            if not said:
                print(orca.why(), flush=True)
            # Every dialog kind and the settings app, in each language, on X and on mutter alike.
            pin_dialog(orca, lang, socket_path, ctl, env)
            grant(orca, lang, work, socket_path, env)
            login_choice(orca, lang, socket_path)
            offer(orca, lang, work, config, vaultd_env, fpstub)
            new_pin(orca, lang, socket_path)
            confirm(orca, lang, socket_path)
            fingerprint_wait(orca, lang, socket_path, ctl, fpstub, env)
            settings_window(orca, lang, dict(env, LANG=locale, LOCPATH=locpath))
            if lang == "en":
                # The next language's PIN dialog is the PIN's, not the fingerprint's wait.
                r = subprocess.run(ctl + ["disable", "--yes", "fingerprint"], capture_output=True, text=True, env=env)
                check(r.returncode == 0, "fingerprint: turned off again (%s)" % r.stderr.strip())
            orca.stop()
            spoken += orca.speech.lines()
            orca = None
        # Whole, or a key at a time (Orca echoes keys as they are typed, and must not in a password field).
        texts = [m.group(1).strip() for m in map(SAID.match, spoken) if m]
        digits = [t for t in texts if t.isdigit()]
        check(bool(texts) and not any(typed in t for t in texts for typed in TYPED) and not digits,
              "the PIN is never spoken, whole or a digit at a time (%d digits said)" % len(digits))
    finally:
        if orca is not None:
            orca.stop()
        vaultd.terminate()
        vaultd.wait(10)
        if check.failed:
            vaultd_log.seek(0)
            for line in vaultd_log:
                if " warning " in line or " error " in line:
                    print("VAULTD " + line.rstrip(), flush=True)
        vaultd_log.close()
        spd.terminate()
        spd.wait(10)
        if KEYS is not None:
            KEYS.close()
        launcher.terminate()
        shutil.rmtree(work, ignore_errors=True)
    print("orca: %d failed" % check.failed, flush=True)
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
