"""Typing on a Wayland desktop as a person at the keyboard would, through GNOME's
compositor: mutter's org.gnome.Mutter.RemoteDesktop D-Bus interface, which is
how gnome-remote-desktop injects keys. (xdotool is X11's; a Wayland client
cannot send keys to another program's window.)

    keys = wayland_keys.connect()      # None where no mutter offers it
    keys.type_text("482915")
    keys.key("Return"); keys.key("alt+c")   # xdotool's names for the same keys
    keys.chord(ALT, ord("o"))

mutter answers on the session bus it was started with; REMOTE_DESKTOP_BUS
names that bus's address when it is not this process's own (the tests run
each script in a private session bus, and mutter in another). Only keyboard
events are sent: mutter takes them without a ScreenCast stream.
"""
import os
import subprocess
import time

from gi.repository import Gio, GLib

NAME = "org.gnome.Mutter.RemoteDesktop"
SESSION = NAME + ".Session"

# X keysyms (X11/keysymdef.h) for the keys the tests press by name; a
# printable ASCII character's keysym is its code point.
ALT = 0xffe9
CONTROL = 0xffe3
SHIFT = 0xffe1
KEYSYMS = {"alt": ALT, "ctrl": CONTROL, "shift": SHIFT, "Return": 0xff0d, "Tab": 0xff09, "Escape": 0xff1b,
           "BackSpace": 0xff08, "Up": 0xff52, "Down": 0xff54, "Left": 0xff51, "Right": 0xff53, "space": 0x20}


def keysym(name):
    """The keysym of a key named as xdotool names it ("Return", "c", "alt")."""
    if name in KEYSYMS:
        return KEYSYMS[name]
    if len(name) == 1 and 0x20 <= ord(name) <= 0x7e:
        return ord(name)
    raise ValueError("no keysym known for %r" % name)


class Keyboard:
    """A remote-desktop session on mutter: one virtual keyboard, ended when
    this process's bus connection closes (mutter stops a session whose client
    is gone)."""

    def __init__(self, bus, path):
        self.bus, self.path = bus, path

    def _call(self, method, args=None):
        # Synchronous: when the call returns, mutter has queued the event, so
        # the keys reach the window in the order they were sent.
        return self.bus.call_sync(NAME, self.path, SESSION, method, args, None, Gio.DBusCallFlags.NONE, 5000, None)

    def press(self, sym, pressed=True):
        """Presses (or releases) the key with X keysym `sym`; mutter picks the
        keycode (and Shift, for a character that needs it) from its keymap."""
        self._call("NotifyKeyboardKeysym", GLib.Variant("(ub)", (sym, pressed)))

    def release(self, sym):
        self.press(sym, False)

    def tap(self, sym):
        self.press(sym)
        self.release(sym)

    def chord(self, modifier, sym):
        """`sym` with `modifier` held (ALT and a letter: a mnemonic), both released."""
        self.press(modifier)
        try:
            self.tap(sym)
        finally:
            self.release(modifier)

    def key(self, spec):
        """xdotool's `key` argument: "Return", "alt+c", "ctrl+shift+v"."""
        names = spec.split("+")
        mods = [keysym(n) for n in names[:-1]]
        for m in mods:
            self.press(m)
        try:
            self.tap(keysym(names[-1]))
        finally:
            for m in reversed(mods):
                self.release(m)

    def type_text(self, text, delay=0.04):
        """Each character pressed and released, paced as xdotool's --delay is
        (a person types no faster; the events are ordered either way)."""
        for ch in text:
            self.tap(keysym(ch))
            time.sleep(delay)

    def close(self):
        try:
            self._call("Stop")
        except GLib.Error:
            pass


def press(keyboard, spec):
    """A key pressed and released, named as xdotool names it ("Return", "alt+c"):
    through mutter's `keyboard` (a Keyboard), or with xdotool on X when it is None."""
    if keyboard is not None:
        keyboard.key(spec)
    else:
        subprocess.run(["xdotool", "key", spec])


def type_into(keyboard, text):
    """`text` typed into the focused window one key at a time, as press() sends keys."""
    if keyboard is not None:
        keyboard.type_text(text)
    else:
        subprocess.run(["xdotool", "type", "--delay", "40", text])


def _bus():
    address = os.environ.get("REMOTE_DESKTOP_BUS")
    if not address:
        return Gio.bus_get_sync(Gio.BusType.SESSION, None)
    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    return Gio.DBusConnection.new_for_address_sync(address, flags, None, None)


def _has_owner(bus, name):
    reply = bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner",
                          GLib.Variant("(s)", (name,)), None, Gio.DBusCallFlags.NONE, 5000, None)
    return reply.unpack()[0]


def connect(timeout=30):
    """A started Keyboard, or None when no mutter offers RemoteDesktop on the
    bus within `timeout` seconds (weston, sway: nothing here can type)."""
    try:
        bus = _bus()
    except GLib.Error:
        return None
    end = time.time() + timeout
    # mutter takes its bus names while it starts; the tests may get here first.
    while not _has_owner(bus, NAME):
        if time.time() >= end:
            return None
        time.sleep(0.2)
    path = bus.call_sync(NAME, "/org/gnome/Mutter/RemoteDesktop", NAME, "CreateSession", None, None,
                         Gio.DBusCallFlags.NONE, 5000, None).unpack()[0]
    keyboard = Keyboard(bus, path)
    keyboard._call("Start")
    # mutter 43 adds the virtual keyboard to its seat only with the first key
    # event, and until a seat has a keyboard no window gets the keyboard focus:
    # the window that is open then is given it by that first key, which is
    # lost. A Shift pressed and released now, before any window is open, plugs
    # the keyboard in as a desktop's always is.
    keyboard.tap(SHIFT)
    return keyboard
