"""SessionVault's own dialog (clients/dialog/sessionvault-pinentry) where it
cannot draw: it must hand the whole conversation to the system's pinentry,
arguments and all, before saying a word (a terminal session gets
pinentry-curses as before), and with no other pinentry answer every question
with an error rather than hang. Its windows are tested under Xvfb, weston and mutter
through AT-SPI (Tests/desktop/dialog_a11y.py, DesktopPromptTests).

Run from the repository root: python3 -m unittest discover -s Tests/python
"""
import os
import shutil
import subprocess
import tempfile
import unittest

from test_client import ROOT

DIALOG = os.path.join(ROOT, "clients", "dialog", "sessionvault-pinentry")
FAKE_PINENTRY = os.path.join(ROOT, "Tests", "pinentry", "fake-pinentry")


class TestDialogWithoutADisplay(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sv-dialog-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.bin = os.path.join(self.dir, "bin")
        os.mkdir(self.bin)

    def talk(self, commands, extra_env=None, args=()):
        env = {"PATH": self.bin + ":/usr/bin:/bin", "HOME": self.dir, "LANG": "C.UTF-8"}
        env.update(extra_env or {})
        r = subprocess.run([DIALOG, *args], input="".join(c + "\n" for c in commands), capture_output=True,
                           text=True, timeout=30, env=env)
        return r.stdout.splitlines()

    def test_it_hands_the_conversation_to_the_systems_pinentry(self):
        # The system's pinentry here is the scripted one, found on PATH as "pinentry".
        os.symlink(FAKE_PINENTRY, os.path.join(self.bin, "pinentry"))
        log, script = os.path.join(self.dir, "log"), os.path.join(self.dir, "script")
        with open(script, "w") as f:
            f.write("pin 482915\n")
        out = self.talk(["SETPROMPT PIN:", "GETPIN", "BYE"], {"FAKE_PINENTRY_LOG": log, "FAKE_PINENTRY_SCRIPT": script},
                        args=("--ttyname", "/dev/pts/7", "--ttytype", "xterm-256color"))
        self.assertEqual(out, ["OK Pleased to meet you", "OK", "D 482915", "OK", "OK closing connection"])
        with open(log) as f:
            started = f.readline()
        # The same arguments vaultd gave, and every line of the conversation went there.
        self.assertIn("ARGS=--ttyname /dev/pts/7 --ttytype xterm-256color", started)
        self.assertNotIn("sessionvault", "".join(out))

    def test_with_no_other_pinentry_every_question_is_an_error(self):
        bare = os.path.join(self.dir, "empty")
        os.mkdir(bare)
        env = {"PATH": bare}
        r = subprocess.run(["/usr/bin/python3", DIALOG], input="SETDESC x\nGETPIN\nCONFIRM\nBYE\n", capture_output=True,
                           text=True, timeout=30, env=env)
        out = r.stdout.splitlines()
        self.assertEqual(out[0], "OK Pleased to meet you")
        self.assertEqual(out[1], "OK")
        self.assertTrue(out[2].startswith("ERR ") and "no display" in out[2], out)
        self.assertTrue(out[3].startswith("ERR "), out)
        self.assertEqual(out[4], "OK closing connection")

    def test_it_never_hands_over_to_itself(self):
        # A PATH whose "pinentry" is this very program (an alternative set to it) must not loop.
        os.symlink(DIALOG, os.path.join(self.bin, "pinentry"))
        bare = {"PATH": self.bin}
        r = subprocess.run(["/usr/bin/python3", DIALOG], input="GETPIN\nBYE\n", capture_output=True, text=True,
                           timeout=30, env=bare)
        self.assertEqual(r.stdout.splitlines()[0], "OK Pleased to meet you")
        self.assertTrue(r.stdout.splitlines()[1].startswith("ERR "), r.stdout)


if __name__ == "__main__":
    unittest.main()
