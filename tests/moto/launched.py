"""The launcher as the smoke tests start it: on a free port, with short phases, one per test
class or module; `stop` ends it."""

import os
import subprocess
import sys

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
