"""The launcher as the smoke tests start it: on a free port, with short phases, one per test
class (`Launched`) or module; `stop` ends it."""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def start(phase_seconds=0.4):
    """The launcher's process and its URL, once it listens."""
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "launcher.py"), "--port", "0", "--phase-seconds", str(phase_seconds)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("port="), line
    return proc, f"http://127.0.0.1:{line.strip().split('=')[1]}"


def stop(proc):
    proc.terminate()
    proc.wait()


class Launched(unittest.TestCase):
    """A test class with a launcher of its own at `self.url`, started before its first test and
    stopped after its last."""

    @classmethod
    def setUpClass(cls):
        cls.proc, cls.url = start()

    @classmethod
    def tearDownClass(cls):
        stop(cls.proc)
