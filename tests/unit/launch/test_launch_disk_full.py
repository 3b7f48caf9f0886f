"""A full disk under LOG_DIR (issue 30 §1, the launcher): the run that
cannot be written fails for that reason, the sweep stops there with its
summary and one error line naming the path and the free space, exit
NOT_WRITABLE; the runs already finished are kept and counted; no traceback,
no temporary file."""

import errno
import os
import signal
import subprocess

import pytest

from official_bench.contracts import exit_status
from official_bench.host import atomic
from official_bench.launch import __main__ as launch_main
from support.helpers import extract_tables
from support.log_tree_runs import bz4, finish, start, wait_for
from support.run_scripts import PY, RUN_DEFAULTS, clean_env, failures


def _mount_tmpfs(folder, size="8m"):
    """A small tmpfs at `folder`, or pytest.skip with the reason."""
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}",
                           "tmpfs", str(folder)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); "
                    "test_launcher_json_copy_error_injected covers the path")


def _fill(folder):
    """Writes a file until the file system is full."""
    chunk = b"\0" * 65536
    with open(folder / "filler", "wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                break
    with open(folder / "filler.tail", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0")
        except OSError:
            pass


def _check_kept_run_1(root, out):
    """Run 1 intact: log, JSON and an ok status; no temporary file left."""
    case = root / "1n1g"
    assert (case / "rn50_b4_fp32_1.json").stat().st_size > 0
    assert '"status": "ok"' in (case / "rn50_b4_fp32_1.log.status.json"
                                ).read_text()
    assert [p for p in root.rglob("*") if p.name.endswith(".tmp")] == []
    assert "Traceback" not in out
    assert "1n1g run 3: starting" not in out
    assert "1n1g run 1: ok" in out


@pytest.mark.slow
def test_launcher_log_on_full_disk_stops_sweep(tmp_path):
    logs = tmp_path / "logs"
    _mount_tmpfs(logs)
    try:
        # The sleep before run 2 is the time to fill the disk in (well
        # under a second; 8 s before, 4 s is still ample).
        proc = start(tmp_path, "3", SLEEP_SECONDS="4")
        wait_for(proc, "1n1g run 1: ok")
        _fill(logs)
        rc, out = finish(proc)
        assert rc == exit_status.NOT_WRITABLE, failures(tmp_path, out)
        root = bz4(tmp_path)
        log2 = root / "1n1g" / "rn50_b4_fp32_2.log"
        line = (f"cannot write the run's log to {log2}: no space left on "
                "the device (0 B free there)")
        assert f"1n1g run 2: FAILED (a file could not be written): {line}" \
            in out, out
        assert "done: 1 of 2 run(s) ok on every node (3 planned)" in out
        assert out.rstrip().splitlines()[-1] == f"[launch] error: {line}"
        assert "stopping the sweep after 1n1g run 2" in out
        _check_kept_run_1(root, out)
        assert not log2.exists()  # nothing of run 2 but an empty log
        os.remove(logs / "filler")  # room for the extractor's reading
        table, _ = extract_tables(tmp_path, root, PY)
        assert table["1n1g"]["num_runs"] == 1
    finally:
        subprocess.run(["umount", "-l", str(logs)], capture_output=True)


@pytest.mark.slow
def test_launcher_json_copy_error_injected(tmp_path, monkeypatch, capsys):
    """The same path without a mount: the launcher in this process, a real
    tiny trainer, and ENOSPC injected into the result JSON's copy."""
    calls = []
    real = atomic.write_text_atomic

    def full(path, text, exclusive=False):
        if not exclusive:  # the status record (replaced atomically)
            return real(path, text)
        calls.append(path)  # the copy, which never replaces a file
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    monkeypatch.setattr(atomic, "write_text_atomic", full)
    handlers = {s: signal.getsignal(s) for s in
                (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    env = clean_env(tmp_path, **RUN_DEFAULTS)
    env.pop("PYTHON")
    try:
        rc = launch_main.main(["single", "4", "fp32", "2"], environ=env)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    out = capsys.readouterr()
    text = out.out + out.err
    root = bz4(tmp_path)
    json1 = root / "1n1g" / "rn50_b4_fp32_1.json"
    assert rc == exit_status.NOT_WRITABLE, text
    assert calls == [str(json1)]
    line = f"cannot write the run's result JSON (copy) to {json1}: no space"
    assert f"1n1g run 1: FAILED (a file could not be written): {line}" in \
        text
    assert "1n1g run 2: starting" not in text
    assert "done: 0 of 1 run(s) ok on every node (2 planned)" in text
    assert out.err.rstrip().splitlines()[-1].startswith(
        f"[launch] error: {line}")
    status = (root / "1n1g" / "rn50_b4_fp32_1.log.status.json").read_text()
    assert '"status": "failed"' in status and "result JSON" in status
    assert "Traceback" not in text
    assert [p for p in root.rglob("*") if p.name.endswith(".tmp")] == []
