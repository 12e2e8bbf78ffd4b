"""Waiting for the accessibility stack as a running desktop would already have it.

A desktop has its accessibility bus and registry up long before a dialog opens;
started cold on a loaded machine they can keep a toolkit's AT-SPI bridge (and so
pinentry's greeting, or a window's tree) waiting for seconds. The a11y tests wait
for them first, so what they measure is the dialog, not the start of the stack.
"""
import time

import pyatspi


def wait_for_registry(timeout=60):
    """True once the AT-SPI registry answers (it is started on first use)."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            pyatspi.Registry.getDesktop(0).childCount
            return True
        except Exception:
            time.sleep(0.5)
    return False


class Checks:
    """Counts "CHECK <ok|FAIL> <what>" lines, as every a11y script prints them."""

    def __init__(self):
        self.failed = 0

    def __call__(self, ok, what):
        print("CHECK %s %s" % ("ok" if ok else "FAIL", what), flush=True)
        self.failed += 0 if ok else 1


def all_nodes(node, out=None):
    """node and everything under it. GTK 4.8 leaves STATE_SHOWING unset on a window's
    children (a hidden widget is not in its tree at all); a node replaced while it is
    read is skipped, and the next look sees the new one."""
    out = [] if out is None else out
    out.append(node)
    try:
        for child in node:
            if child is not None:
                all_nodes(child, out)
    except Exception:
        pass
    return out
