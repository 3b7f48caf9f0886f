"""Run-script sweeps on the tiny CPU config for the log-tree tests (claims,
RESUME, OVERWRITE, a full disk): start, wait for a line, snapshot a tree."""

import hashlib
import os
import subprocess
import threading
import time

from support.helpers import REPO
from support.run_scripts import clean_env


def bz4(tmp_path, log_dir="logs"):
    return tmp_path / log_dir / "tensorflow" / "resnet50" / "bz4"


def start(tmp_path, *args, script="single", **knobs):
    """A run script as a user starts it; stdout and stderr merged, read by
    a thread into .lines (so a test can wait for a line while it runs)."""
    proc = subprocess.Popen(
        ["timeout", "-k", "10", "500", "bash",
         os.path.join(REPO, f"run_{script}_node.sh"), "4", "fp32", *args],
        cwd=tmp_path, env=clean_env(tmp_path, **knobs),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    proc.lines = []

    def read():
        for line in proc.stdout:
            proc.lines.append(line)
    proc.reader = threading.Thread(target=read, daemon=True)
    proc.reader.start()
    return proc


def output(proc):
    return "".join(proc.lines)


def wait_for(proc, text, timeout=400):
    """Waits until `text` is in the output; AssertionError with the output
    if the process ends first or the time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in output(proc):
            return
        if proc.poll() is not None:
            proc.reader.join(5)
            if text in output(proc):
                return
            raise AssertionError(f"ended ({proc.returncode}) before "
                                 f"{text!r}:\n{output(proc)}")
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} after {timeout} s:\n{output(proc)}")


def finish(proc, timeout=500):
    proc.wait(timeout)
    proc.reader.join(10)
    return proc.returncode, output(proc)


def snapshot(root):
    """{relative path: (size, mtime_ns, sha1)} of every file under root."""
    found = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                digest = hashlib.sha1(f.read()).hexdigest()
            st = os.stat(path)
            found[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns,
                                                  digest)
    return found
