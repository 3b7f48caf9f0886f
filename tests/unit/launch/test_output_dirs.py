"""LOG_DIR and MODEL_DIR where a folder cannot be made (a file in the way):
refused before anything is written, dry runs too, in one line naming the
setting, where it came from and the path, exit NOT_WRITABLE; on two nodes
every node stops at the barrier's first meeting. Real launchers, stand-in
trainers (support/launch_stand_in.py)."""

import os

from official_bench.contracts import exit_status as es
from official_bench.launch import preflight
from support.helpers import free_ports
from support.launch_cli import SCRIPTS, clean_env, run_together, script
from support.launch_stand_in import stand_in


def test_not_a_directory_names_the_path_in_the_way(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    assert preflight.not_a_directory(str(tmp_path / "new" / "deeper")) \
        is None
    assert preflight.not_a_directory(str(tmp_path)) is None
    assert preflight.not_a_directory(str(afile)) == \
        f"{afile} is a file, not a directory"
    assert preflight.not_a_directory(str(afile / "x" / "y")) == \
        f"{afile} is a file, not a directory"
    os.symlink(tmp_path / "gone", tmp_path / "link")
    assert preflight.not_a_directory(str(tmp_path / "link" / "x")) == \
        f"{tmp_path / 'link'} is a broken symbolic link (to " \
        f"{tmp_path / 'gone'})"


def test_log_dir_on_proc_is_refused_by_a_dry_run(tmp_path):
    """/proc takes no folder: one line and exit 5 before any run, as for a
    file in the way, not a FileNotFoundError traceback."""
    if not os.path.isdir("/proc/self"):
        return
    out = script("single", tmp_path, "4", "fp32", "1", "--dry-run",
                 DEVICE="cpu", LOG_DIR="/proc/x")
    assert out.returncode == es.NOT_WRITABLE, out.stdout + out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        "error: run_single_node.sh: LOG_DIR='/proc/x' (env LOG_DIR): cannot "
        "make the log folder /proc/x/tensorflow/resnet50/bz4/1n1g: /proc is "
        "on the kernel's proc file system, which takes no new files or "
        "folders")


def _refused(out, setting, value, source, folder):
    assert out.returncode == es.NOT_WRITABLE, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"error: run_single_node.sh: {setting}={value!r} ({source}): cannot "
        f"make the {folder} folder {value}/tensorflow/resnet50/bz4/1n1g: "
        f"{value} is a file, not a directory")


def test_log_dir_that_is_a_file_stops_before_any_run(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    out = script("single", tmp_path, "4", "fp32", "1", "--python",
                 stand_in(tmp_path, "ok"), DEVICE="cpu", LOG_DIR=afile)
    _refused(out, "LOG_DIR", str(afile), "env LOG_DIR", "log")
    assert not (tmp_path / "model_dir").exists()  # nothing was made


def test_model_dir_that_is_a_file_is_refused_by_a_dry_run(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    out = script("single", tmp_path, "4", "fp32", "1", "--dry-run",
                 "--model-dir", str(afile), DEVICE="cpu")
    _refused(out, "MODEL_DIR", str(afile), "command line", "model_dir")


def test_one_node_that_cannot_make_its_folders_stops_every_node(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    w0, w1, b = free_ports(3)
    commands = []
    for k in (0, 1):
        env = clean_env(tmp_path, DEVICE="cpu", TASK_INDEX=k,
                        NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}",
                        BARRIER_PORT=b, BARRIER_TIMEOUT=60)
        if k == 1:
            env["MODEL_DIR"] = str(afile)
        commands.append((["bash", SCRIPTS["two"], "4", "fp32", "1",
                          "--python", stand_in(tmp_path, "ok")], env))
    codes, outs = run_together(commands, tmp_path, 120)
    assert codes == [es.NOT_WRITABLE] * 2, outs
    assert f"error: node 1 (127.0.0.1:{w1}): MODEL_DIR='{afile}' (env " \
        "MODEL_DIR): cannot make the model_dir folder" in outs[0], outs[0]
    for out in outs:
        assert "no run started (on any node): 1 node(s) cannot make their " \
            "output folders" in out, out
        assert "Traceback" not in out
    assert not list((tmp_path / "logs").rglob("*.log"))
