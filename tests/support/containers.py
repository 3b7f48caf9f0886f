"""The project's image in podman for the system tests: whether containers run
here, the test image (built once, reused while its sources are unchanged),
and containers on a shared network.

- skip_reason(): None where podman runs a container of BASE here, else one
  line why (no podman, no base image: `bash scripts/container_setup.sh`).
- test_image(): the name of IMAGE, built from the Containerfile on BASE at
  most once per session (a file lock serialises pytest-xdist workers); an
  image whose `ob.sources` label matches the sources' hash is reused as is,
  else podman rebuilds only the layers whose inputs changed (the image it
  replaces is removed). The host's pip cache is mounted at build time. Skips
  with skip_reason(); fails with the build's tail when the build fails.
- argv(image, command, name=, network=, env=, volumes=, workdir=): the
  `podman run --rm` command line; volumes map host path -> container path.
- run(image, command, timeout=, **same) -> CompletedProcess (text, stdout
  and stderr together); start(...) -> Popen, the same, in the background.
- remove(*names): `podman rm -f` of containers, whatever their state.
- network(name, names=()): context manager creating a podman network
  (containers on it reach each other by --name) and removing it afterwards,
  with the containers `names` (or those set on `net.names` meanwhile).
"""

import contextlib
import fcntl
import fnmatch
import hashlib
import os
import shutil
import subprocess

import pytest

from support.helpers import REPO

BASE = "localhost/debian-base:bookworm"
IMAGE = "localhost/official-bench:test"
SETUP = "bash scripts/container_setup.sh"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
CACHE = os.path.expanduser("~/.cache/official_bench")
PIP_CACHE = os.path.expanduser("~/.cache/pip")
BUILD_TIMEOUT = 1800
_state = {}


def podman(*args, timeout=120):
    return subprocess.run(["podman", *args], capture_output=True, text=True,
                          timeout=timeout)


def skip_reason():
    """None where containers run here, else one line saying why."""
    if "reason" not in _state:
        _state["reason"] = _probe()
    return _state["reason"]


def _probe():
    if shutil.which("podman") is None:
        return f"podman not found (run: {SETUP})"
    if podman("image", "exists", BASE).returncode != 0:
        return f"no base image {BASE} (run: {SETUP})"
    out = podman("run", "--rm", "--network", "none", BASE, "true")
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return f"podman cannot run a container here: {tail} (see {SETUP})"
    return None


def require():
    reason = skip_reason()
    if reason:
        pytest.skip(reason)


def _ignored(rel, patterns):
    parts = rel.split(os.sep)
    return "__pycache__" in parts or rel.endswith(".pyc") or any(
        fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(parts[0], p)
        for p in patterns)


def sources_hash():
    """sha256 over the build context's files (names and contents), less
    what .containerignore leaves out."""
    with open(os.path.join(REPO, ".containerignore")) as f:
        patterns = [l.strip().strip("/") for l in f
                    if l.strip() and not l.startswith("#")]
    digest = hashlib.sha256()
    for top, dirs, files in os.walk(REPO):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(top, name)
            rel = os.path.relpath(path, REPO)
            if _ignored(rel, patterns) or not os.path.isfile(path):
                continue
            digest.update(rel.encode() + b"\0")
            with open(path, "rb") as f:
                digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def _built():
    """(image id, its ob.sources label), or (None, None) where none."""
    out = podman("image", "inspect", "--format",
                 '{{.Id}} {{index .Labels "ob.sources"}}', IMAGE)
    if out.returncode != 0:
        return None, None
    image_id, _, label = out.stdout.strip().partition(" ")
    return image_id, label


def build_argv(label):
    os.makedirs(PIP_CACHE, exist_ok=True)
    return ["podman", "build", "--network", "host", "-f", "Containerfile",
            "--build-arg", f"BASE={BASE}", "--build-arg",
            f"PIP_CERT_FILE={CA_BUNDLE}",
            "-v", f"{CA_BUNDLE}:{CA_BUNDLE}:ro",
            "-v", f"{PIP_CACHE}:/root/.cache/pip",
            "--label", f"ob.sources={label}", "-t", IMAGE, "."]


def test_image():
    """IMAGE, built or reused (see the module's docstring)."""
    require()
    if "image" in _state:
        return _state["image"]
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, "container-image.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        label = sources_hash()
        old, built_from = _built()
        if built_from != label:
            out = subprocess.run(build_argv(label), cwd=REPO, text=True,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT,
                                 timeout=BUILD_TIMEOUT)
            if out.returncode != 0:
                pytest.fail("podman build of the test image failed:\n"
                            + out.stdout[-4000:])
            if old and _built()[0] != old:
                podman("rmi", old)  # its own layers; refused while in use
    _state["image"] = IMAGE
    return IMAGE


test_image.__test__ = False  # a helper, not a test


def argv(image, command, name=None, network=None, env=None, volumes=None,
         workdir=None):
    """`podman run --rm` with these options (see the module docstring)."""
    line = ["podman", "run", "--rm"]
    if name:
        line += ["--name", name, "--hostname", name]
    if network:
        line += ["--network", network]
    for key, value in (env or {}).items():
        line += ["-e", f"{key}={value}"]
    for host, inside in (volumes or {}).items():
        line += ["-v", f"{host}:{inside}"]
    if workdir:
        line += ["-w", workdir]
    return line + [image] + list(command)


def run(image, command, timeout=600, **options):
    """The container's run to its end: CompletedProcess, output as text."""
    return subprocess.run(argv(image, command, **options), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=timeout)


def start(image, command, **options):
    """The container started in the background: a Popen (text output)."""
    return subprocess.Popen(argv(image, command, **options), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def remove(*names):
    if names:
        podman("rm", "-f", "--ignore", *names)


class _Network(str):
    """A network's name, with the containers to remove with it."""
    names = ()


@contextlib.contextmanager
def network(name, names=()):
    """Creates network `name` (removing a stale one first); afterwards
    removes the containers `names` and the network."""
    remove(*names)
    podman("network", "rm", "-f", name)
    out = podman("network", "create", name)
    if out.returncode != 0:
        pytest.skip(f"podman network create failed: {out.stderr.strip()}")
    net = _Network(name)
    net.names = tuple(names)
    try:
        yield net
    finally:
        remove(*net.names)
        podman("network", "rm", "-f", name)
