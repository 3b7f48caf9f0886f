"""DATA_DIR is never ignored (issue 40 §1): with it, every run reads it
(the CPU smoke config's synthetic builder becomes records); a missing or
empty one stops the launcher before anything is written, naming the
directory and what it looked for, exit 2. Every test but the last runs the
launcher alone (no TensorFlow); the last trains one tiny run on a tiny
record set and finds the records read in its log."""

import time

import pytest

from official_bench.contracts import exit_status
from official_bench.launch import data_dir as data_dir_lib
from support.helpers import free_ports
from support.launch_cli import SCRIPTS, clean_env, run_together, script
from support.run_scripts import RUN_DEFAULTS, failures

LOOKED = ("looked for train-* (classic) and *-train.tfrecord-* (TFDS, also "
          "under <name>/<version>/)")


def _refused(tmp_path, data_dir, *args, **knobs):
    """The run script with DATA_DIR: (its one error line, elapsed s)."""
    began = time.monotonic()
    out = script("single", tmp_path, "16", "fp32", *args,
                 DATA_DIR=data_dir, **knobs)
    elapsed = time.monotonic() - began
    assert out.returncode == exit_status.CONFIG, out.stdout + out.stderr
    errors = out.stderr.strip().splitlines()
    assert len(errors) == 1 and out.stdout == "", out.stdout + out.stderr
    assert not (tmp_path / "logs").exists()  # no log, no case directory
    return errors[0], elapsed


def test_missing_data_dir_stops_at_once_naming_it(tmp_path):
    line, elapsed = _refused(tmp_path, "/nonexistent/imagenet")
    assert line == (
        "error: run_single_node.sh: DATA_DIR='/nonexistent/imagenet' (env "
        "DATA_DIR) does not exist or is not a directory; write a record set "
        "there (official-bench-build-records), or unset DATA_DIR for "
        "synthetic data")
    # No TensorFlow, no run: a second is the target; 10 s allows a loaded
    # machine's Python start-up (it measured 0.2 s on 2 busy cores).
    assert elapsed < 10


def test_data_dir_without_train_files_says_what_it_looked_for(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "validation-00000-of-00001").write_bytes(b"x")
    (data / ".train-00000-of-00001.tmp").write_bytes(b"x")  # unfinished
    line, _ = _refused(tmp_path, str(data))
    assert line == (
        f"error: run_single_node.sh: DATA_DIR='{data}' (env DATA_DIR) holds "
        f"no train files for train_dataset.builder records: {LOOKED}; "
        "write a record set there (official-bench-build-records), or unset "
        "DATA_DIR for synthetic data")


def test_a_builder_that_would_ignore_data_dir_is_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    line, _ = _refused(tmp_path, str(data),
                       PARAMS_OVERRIDE="train_dataset.builder=synthetic")
    assert line.startswith(
        f"error: run_single_node.sh: DATA_DIR='{data}' (env DATA_DIR) is "
        "set, but PARAMS_OVERRIDE sets train_dataset.builder=synthetic, "
        "which does not read it; builders that read it: records, tfds, "
        "service, python"), line


def test_the_jax_backend_reads_records_from_data_dir(tmp_path):
    """JAX reads records without TensorFlow (jax_backend/host_feed.py):
    DATA_DIR makes its runs read them, as on TensorFlow."""
    data = _records(tmp_path / "data")
    out = script("single", tmp_path, "16", "fp32", "1", "--dry-run",
                 DEVICE="cpu", DATA_DIR=str(data), BACKEND="jax")
    assert out.returncode == 0, out.stdout + out.stderr
    command = [x for x in out.stdout.splitlines() if "command:" in x][0]
    assert '"builder": "records"' in command and "synthetic" not in command
    assert '"backend": "jax"' in command
    assert f"--data_dir={data}" in command


def _records(folder):
    folder.mkdir()
    for i in range(2):
        (folder / f"train-0000{i}-of-00002").write_bytes(b"")
    return folder


def test_cpu_config_reads_records_from_data_dir(tmp_path):
    """The CPU smoke config is synthetic; with DATA_DIR its runs read
    records from it (dry run: the plan and the command)."""
    data = _records(tmp_path / "data")
    out = script("single", tmp_path, "16", "fp32", "1", "--dry-run",
                 DEVICE="cpu", DATA_DIR=str(data))
    assert out.returncode == 0, out.stderr
    assert "note: DATA_DIR is set: train_dataset.builder records (the " \
        "config's is synthetic)" in out.stdout
    assert f"note: DATA_DIR {data}: train_dataset.builder records reads 2 " \
        "train file(s) (train-00000-of-00002 ... train-00001-of-00002)" \
        in out.stdout
    command = [x for x in out.stdout.splitlines() if "command:" in x][0]
    assert '"builder": "records"' in command and "synthetic" not in command
    assert f"--data_dir={data}" in command


def test_dry_run_says_a_real_run_would_stop(tmp_path):
    out = script("single", tmp_path, "16", "fp32", "1", "--dry-run",
                 DEVICE="cpu", DATA_DIR="/nonexistent/imagenet")
    assert out.returncode == 0, out.stderr
    assert "does not exist or is not a directory; write a record set " \
        "there (official-bench-build-records), or unset DATA_DIR for " \
        "synthetic data; a real run stops here (exit 2)" in out.stdout


def test_train_keys_and_other_builders(tmp_path):
    keys = data_dir_lib.train_keys(
        {"train_dataset": {"builder": "tfds"}},
        {"train_dataset": {"builder": "records", "split": "train"}})
    assert (keys["builder"], keys["split"], keys["layout"]) == \
        ("tfds", "train", "auto")
    empty = tmp_path / "tfds"
    empty.mkdir()
    assert data_dir_lib.problem(str(empty), "DATA_DIR='x'", keys) == (
        "DATA_DIR='x' is empty (train_dataset.builder tfds); write a record "
        "set there (official-bench-build-records), or unset DATA_DIR for "
        "synthetic data")
    (empty / "imagenet2012").mkdir()
    assert data_dir_lib.problem(str(empty), "DATA_DIR='x'", keys) is None
    remote = "gs://bucket/imagenet"
    assert data_dir_lib.problem(remote, "DATA_DIR", keys) is None
    assert "a remote path: not checked" in data_dir_lib.describe(remote,
                                                                 keys)


def test_two_nodes_stop_together_on_one_nodes_data_dir(tmp_path):
    """Node 1's DATA_DIR is missing: it tells node 0 through the barrier and
    both stop before any run (exit 2), node 0 naming node 1's directory,
    instead of node 0 waiting BARRIER_TIMEOUT for a node that quit."""
    data = _records(tmp_path / "data")
    w0, w1, b = free_ports(3)
    commands = [(["bash", SCRIPTS["two"], "16", "fp32", "1"], clean_env(
        tmp_path, DEVICE="cpu", NODES=f"127.0.0.1:{w0},127.0.0.1:{w1}",
        BARRIER_PORT=b, TASK_INDEX=k, BARRIER_TIMEOUT=60,
        DATA_DIR=str(data) if k == 0 else "/nonexistent/imagenet"))
        for k in (0, 1)]
    codes, outs = run_together(commands, tmp_path, 60)
    assert codes == [exit_status.CONFIG] * 2, outs
    assert "error: node 1 (127.0.0.1:" in outs[0] and \
        "cannot start the trainer: DATA_DIR='/nonexistent/imagenet' (env " \
        "DATA_DIR) does not exist or is not a directory" in outs[0], outs[0]
    assert "run 1: starting" not in outs[0] + outs[1]
    assert not list((tmp_path / "logs").rglob("*.log"))


@pytest.mark.slow
def test_run_script_reads_a_tiny_record_set(tmp_path):
    """One tiny CPU run with DATA_DIR on 8 records: its log says the
    records pipeline read the train shard."""
    from support.records import write_records
    data = write_records(str(tmp_path / "records"), 8)
    out = script("single", tmp_path, "4", "fp32", "1", timeout=400,
                 DATA_DIR=data, **RUN_DEFAULTS)
    assert out.returncode == 0, failures(tmp_path, out.stdout + out.stderr)
    log = (tmp_path / "logs" / "tensorflow" / "resnet50" / "bz4" / "1n1g" /
           "rn50_b4_fp32_1.log").read_text()
    assert "train_dataset: 1 classic record file(s) for split train " \
        "(train-00000-of-00001)\n" in log
    assert f"--data_dir={data}" in log and '"builder": "records"' in log
    assert "official_bench: run finished: 6 steps" in log


@pytest.mark.parametrize("split_dir", ["train", "val"])
def test_an_image_folder_as_data_dir_says_to_build_records(tmp_path,
                                                           split_dir):
    # The trainer's line says so too (record_sets.image_folder_hint); the
    # launcher's said only "write a record set there".
    (tmp_path / split_dir / "n01").mkdir(parents=True)
    keys = data_dir_lib.train_keys({}, {"train_dataset": {
        "builder": "records", "split": "train"}})
    line = data_dir_lib.problem(str(tmp_path), "DATA_DIR='x'", keys)
    assert line == (
        f"DATA_DIR='x' holds no train files for train_dataset.builder "
        f"records: {LOOKED}; it holds an image folder ({split_dir}/), not "
        f"TFRecords: build records from it (official-bench-build-records "
        f"--input_dir={tmp_path} --output_dir=DIR) and set DATA_DIR=DIR")
