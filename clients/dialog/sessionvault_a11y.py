"""What SessionVault's own dialog and its settings app share: a way to know when
screen readers can hear a window (GTK 4.8, Debian 12).

Installed beside the Python client (/usr/lib/python3/dist-packages); in a checkout
it is next to the dialog (clients/dialog), which the settings app finds there.
"""
import os
import time

from gi.repository import Gio, GLib


def once_on_the_accessibility_bus(then, timeout=10.0):
    """Calls then() once screen readers can read this process's windows over the
    accessibility bus (AT-SPI); never when there is no such bus, or after `timeout`.

    GTK 4.8 (Debian 12) joins the bus a moment after a window is shown, and what
    the window says before that (it opened, the focus is in the PIN field) reaches
    no screen reader: Orca said nothing at all when the dialog appeared. GTK puts
    its AT-SPI cache object on the bus once the registry has taken it in (asked
    before, it "does not exist"), with the window's objects: once it answers, they
    do. Asked without waiting (the answer comes from this process's own main loop)."""
    try:
        session = Gio.bus_get_sync(Gio.BusType.SESSION, None)
        address = session.call_sync("org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus", "GetAddress", None,
                                    GLib.VariantType("(s)"), Gio.DBusCallFlags.NONE, 2000, None).unpack()[0]
        bus = Gio.DBusConnection.new_for_address_sync(
            address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
            None, None)
    except GLib.Error:
        return
    end = time.monotonic() + timeout

    def daemon(method, *args):
        return bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", method,
                             GLib.Variant("(%s)" % "".join("s" for _ in args), args) if args else None,
                             None, Gio.DBusCallFlags.NONE, 2000, None).unpack()[0]

    def gtks_name():
        """GTK's own connection to the bus: the other one this process has."""
        for name in daemon("ListNames"):
            if name.startswith(":") and name != bus.get_unique_name():
                try:
                    if daemon("GetConnectionUnixProcessID", name) == os.getpid():
                        return name
                except GLib.Error:
                    pass  # gone since it was listed
        return None

    def ask():
        try:
            name = gtks_name()
        except GLib.Error:
            name = None
        if name is None:
            again()
        else:
            bus.call(name, "/org/a11y/atspi/cache", "org.a11y.atspi.Cache", "GetItems", None, None,
                     Gio.DBusCallFlags.NONE, 2000, None, answered)
        return False

    def again():
        if time.monotonic() < end:
            GLib.timeout_add(50, ask)
        else:
            bus.close()

    def answered(connection, result):
        try:
            connection.call_finish(result)
        except GLib.Error:
            again()  # not there yet
            return
        bus.close()
        then()

    ask()
