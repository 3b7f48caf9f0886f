"""A full disk (or a read-only folder) under every writer but the launcher
(tests/unit/launch/ has its own): one `error:` line, last, naming the path,
what was being written and the free space; exit NOT_WRITABLE; nothing
half-written, no temporary left.

The real cases run on a tmpfs of a few pages (tests/support/small_disk.py,
skipped where mounting is not allowed); each has a sibling that injects the
error in-process, so the logic is covered without mounting."""

import errno
import json
import os
import subprocess
import sys

import pytest
import yaml

from official_bench.contracts import exit_status
from official_bench.host.write_errors import NotWritable
from support.helpers import REPO, TINY_OVERRIDE, cli_env, tiny, trainer_cmd
from support.small_disk import PAGE, leave_free, small_tmpfs, temp_files

ENOSPC_LINE = "no space left on the device ("


def _trainer(model_dir, *override):
    """The trainer CLI in a real process, stdout and stderr apart."""
    cmd = trainer_cmd(model_dir, ",".join((TINY_OVERRIDE,) + override))
    return subprocess.run(cmd, cwd=REPO, env=cli_env(), capture_output=True,
                          text=True, timeout=300)


def _last_line(text):
    return [line for line in text.splitlines() if line.strip()][-1]


def _assert_one_line(p, path, what):
    """Exit NOT_WRITABLE, the last stderr line names the path, what and
    the free space, and no traceback anywhere."""
    assert p.returncode == exit_status.NOT_WRITABLE, p.stderr[-3000:]
    last = _last_line(p.stderr)
    assert last.startswith(f"error: cannot write {what} to {path}: "
                           + ENOSPC_LINE), last
    assert last.endswith(" free there)"), last
    assert "Traceback" not in p.stderr + p.stdout, p.stderr[-3000:]
    assert p.stderr.count("error: cannot write") == 1


def _params_intact(model_dir):
    with open(os.path.join(model_dir, "params.yaml")) as f:
        params = yaml.safe_load(f)
    assert params["model"]["name"] == "resnet_cifar"
    assert params["train"]["steps"] == 6


def test_trainer_result_on_full_disk(tmp_path):
    """Room for params.yaml (4 KiB) but not for result.json (9 KiB): the
    run trains, then says so in one line."""
    model_dir = str(tmp_path / "model")
    with small_tmpfs(model_dir, 2 * PAGE):
        p = _trainer(model_dir)
        _assert_one_line(p, os.path.join(model_dir, "result.json"),
                         "the run's result")
        assert p.returncode == exit_status.NOT_WRITABLE
        assert "official_bench: run finished" in p.stderr
        assert sorted(os.listdir(model_dir)) == ["params.yaml"]
        assert temp_files(model_dir) == []
        _params_intact(model_dir)


# The CLI with train_and_evaluate's write failing as a full disk would:
# the sibling of the test above where no tmpfs can be mounted.
INJECTED = """
import errno, sys
from absl import flags
from official_bench import classifier_trainer, trainer
from official_bench.host.write_errors import writing

def full(cfg):
    with writing(cfg.model_dir + "/result.json", "the run's result"):
        raise OSError(errno.EDQUOT, "Disk quota exceeded")
trainer.train_and_evaluate = full
argv = ["classifier_trainer"] + sys.argv[1:]
flags.FLAGS(argv)
sys.exit(classifier_trainer.main(argv[:1]))
"""


def test_trainer_cli_reports_an_injected_quota(tmp_path):
    p = subprocess.run([sys.executable, "-c", INJECTED,
                        f"--model_dir={tmp_path}"], cwd=REPO, env=cli_env(),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == exit_status.NOT_WRITABLE, p.stderr[-3000:]
    assert _last_line(p.stderr).startswith(
        f"error: cannot write the run's result to {tmp_path}/result.json: "
        "disk quota exceeded (")
    assert "Traceback" not in p.stderr


def test_trainer_checkpoint_on_full_disk(tmp_path):
    """TensorFlow's own write (ResourceExhaustedError) is the same line;
    its model.ckpt-0001_temp folder is not left behind."""
    model_dir = str(tmp_path / "model")
    with small_tmpfs(model_dir, 2 * PAGE):
        p = _trainer(model_dir,
                     "train.callbacks.enable_checkpoint_and_export=true")
        _assert_one_line(p, model_dir, r"a checkpoint (model.ckpt-*)")
        assert sorted(os.listdir(model_dir)) == ["params.yaml"]
        _params_intact(model_dir)


def test_trainer_profile_on_full_disk(tmp_path):
    model_dir = str(tmp_path / "model")
    with small_tmpfs(model_dir, 2 * PAGE):
        p = _trainer(model_dir, "runtime.profile_steps=[3,4]")
        _assert_one_line(p, os.path.join(model_dir, "profile"),
                         "the profiler trace")
        runs = os.path.join(model_dir, "profile", "plugins", "profile")
        assert not os.path.isdir(runs) or os.listdir(runs) == []
        assert not [f for _, _, files in os.walk(model_dir) for f in files
                    if f.endswith(".xplane.pb")]
        _params_intact(model_dir)


def test_run_raises_not_writable_for_a_notebook(tmp_path, monkeypatch):
    """The notebook API raises (never exits) with the CLI's line; the
    injected ENOSPC happens inside the atomic write, whose temporary is
    removed."""
    from official_bench import trainer
    from official_bench.host import atomic

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(atomic.os, "fsync", full)
    model_dir = tmp_path / "model"
    with pytest.raises(NotWritable) as info:
        trainer.run(tiny(), model_dir=str(model_dir))
    params = model_dir / "params.yaml"
    assert str(info.value).startswith(
        f"cannot write the run's configuration to {params}: " + ENOSPC_LINE)
    assert info.value.errno == errno.ENOSPC
    assert os.listdir(model_dir) == []  # neither params.yaml nor a .tmp


def test_saved_model_on_full_disk_leaves_nothing(tmp_path):
    """The SavedModel is saved beside its destination and moved in when
    complete: a full disk half-way leaves no half export."""
    from official_bench.runtime.keras_setup import keras
    from official_bench.training import checkpoints
    model = keras.Sequential([keras.layers.Dense(2000, input_shape=(100,))])
    disk = str(tmp_path / "disk")
    with small_tmpfs(disk, 16 * PAGE):
        destination = os.path.join(disk, "saved_model")
        with pytest.raises(NotWritable) as info:
            checkpoints.export_saved_model(model, destination, True)
        assert str(info.value).startswith(
            f"cannot write the SavedModel to {destination}: " + ENOSPC_LINE)
        assert os.listdir(disk) == []


def test_saved_model_error_keeps_the_earlier_export(tmp_path, monkeypatch):
    """Sibling without a mount: TensorFlow's ResourceExhaustedError during
    the save becomes NotWritable; an earlier export stays whole and the
    staging folder is gone."""
    from official_bench.runtime.keras_setup import keras, tf
    from official_bench.training import checkpoints
    model = keras.Sequential([keras.layers.Dense(3, input_shape=(4,))])
    destination = tmp_path / "saved_model"
    checkpoints.export_saved_model(model, str(destination), True)
    before = sorted(os.listdir(destination))
    assert "saved_model.pb" in before

    def full(path, **kwargs):
        os.makedirs(os.path.join(path, "variables"))
        raise tf.errors.ResourceExhaustedError(
            None, None, f"{path}/variables/x; No space left on device")
    monkeypatch.setattr(model, "save", full)
    with pytest.raises(NotWritable):
        checkpoints.export_saved_model(model, str(destination), True)
    assert sorted(os.listdir(tmp_path)) == ["saved_model"]
    assert sorted(os.listdir(destination)) == before


# The extractor ------------------------------------------------------------

EXTRACT_FIXTURE = os.path.join(REPO, "tests", "fixtures", "logs", "bz128")


def _extract(output_dir, capsys):
    from official_bench.extract import extractor
    status = extractor.main(["--log_dir", EXTRACT_FIXTURE, "--output_dir",
                             str(output_dir), "--no_plot"])
    return status, capsys.readouterr()


def test_extractor_on_full_output_dir(tmp_path, capsys):
    out = str(tmp_path / "out")
    with small_tmpfs(out, 4 * PAGE):
        filler = leave_free(out, 0)
        status, io = _extract(out, capsys)
        assert status == exit_status.NOT_WRITABLE, io.err
        last = _last_line(io.err)
        assert last == (f"error: cannot write the extractor's results to "
                        f"{out}: no space left on the device (0 B free "
                        "there)"), last
        assert os.listdir(out) == [os.path.basename(filler)]


def test_extractor_read_only_output_dir(tmp_path, capsys, monkeypatch):
    """Sibling without a mount: EROFS from the write is the same line."""
    from official_bench.host import atomic

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")
    monkeypatch.setattr(atomic.tempfile, "mkstemp", read_only)
    status, io = _extract(tmp_path, capsys)
    assert status == exit_status.NOT_WRITABLE
    assert _last_line(io.err).startswith(
        f"error: cannot write the extractor's results to {tmp_path}: the "
        "file system is read-only (")


# The TFRecord builder -----------------------------------------------------

def _image_tree(root):
    """Two classes of small random PNGs (TensorFlow converts them)."""
    import numpy as np

    from official_bench.runtime.keras_setup import tf
    rng = np.random.default_rng(0)
    for split in ("train", "validation"):
        for c in ("cat", "dog"):
            os.makedirs(os.path.join(root, split, c))
            for i in range(2):
                pixels = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
                with open(os.path.join(root, split, c, f"{i}.png"),
                          "wb") as f:
                    f.write(tf.io.encode_png(pixels).numpy())
    return root


def _build(src, out, capsys):
    from official_bench.data.build import build_records
    status = build_records.main([f"--input_dir={src}", f"--output_dir={out}",
                                 "--train_shards=1", "--validation_shards=1",
                                 "--num_workers=1"], log=lambda line: None)
    return status, capsys.readouterr()


def test_builder_on_full_output_dir(tmp_path, capsys):
    """Room for the manifest, labels.txt and the shard's record, not for
    the shard: one line naming the shard; no partial shard, no .tmp."""
    src = _image_tree(str(tmp_path / "src"))
    out = str(tmp_path / "out")
    with small_tmpfs(out, 3 * PAGE):
        status, io = _build(src, out, capsys)
        assert status == exit_status.NOT_WRITABLE, io.err
        shard = os.path.join(out, "train-00000-of-00001")
        last = _last_line(io.err)
        assert last.startswith(f"error: cannot write a TFRecord shard to "
                               f"{shard}: " + ENOSPC_LINE), last
        assert "Traceback" not in io.err
        assert not os.path.exists(shard)
        assert temp_files(out) == []
        assert sorted(os.listdir(out)) == [".shards", "build_records.json",
                                           "labels.txt"]
        json.load(open(os.path.join(out, "build_records.json")))


def test_builder_unwritable_manifest(tmp_path, capsys, monkeypatch):
    """Sibling without a mount: EDQUOT (or ENOSPC) from the first write."""
    from official_bench.host import atomic
    src = _image_tree(str(tmp_path / "src"))
    out = tmp_path / "out"
    code = getattr(errno, "EDQUOT", errno.ENOSPC)

    def quota(fd):
        raise OSError(code, os.strerror(code))
    monkeypatch.setattr(atomic.os, "fsync", quota)
    status, io = _build(src, out, capsys)
    assert status == exit_status.NOT_WRITABLE
    assert _last_line(io.err).startswith(
        f"error: cannot write the build's manifest to "
        f"{out / 'build_records.json'}: ")
    assert os.listdir(out) == []


# The doctor ---------------------------------------------------------------

def test_doctor_report_not_writable(tmp_path, capsys, monkeypatch):
    """doctor.json goes through the same path: one line, exit 5."""
    from official_bench.doctor import cli, report

    def full(path, text):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(report, "write_text_atomic", full)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    output = tmp_path / "doctor.json"
    status = cli.main(["--only", "tensorflow", "--output", str(output)],
                      out=print)
    io = capsys.readouterr()
    assert status == exit_status.NOT_WRITABLE, io.out + io.err
    assert _last_line(io.err).startswith(
        f"error: cannot write the doctor's report to {output}: "
        + ENOSPC_LINE)
    assert not output.exists()
