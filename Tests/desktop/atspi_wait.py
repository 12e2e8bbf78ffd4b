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
