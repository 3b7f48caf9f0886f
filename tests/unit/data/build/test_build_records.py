"""Section 4: the TFRecord builder CLI (python -m
official_bench.data.build.build_records)."""

import io
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from official_bench.data.build import (
    build_records as br,
    builder,
    example_proto,
    image_codec as codec,
    shards,
    sources,
)
from official_bench.data.records import pipeline
from official_bench.data.records.record_files import classic_files
from official_bench.runtime.keras_setup import tf
from support.helpers import REPO, without_module_env

PIL = pytest.importorskip("PIL", reason="Pillow (the builder extra) is needed")
from PIL import Image  # noqa: E402


def save(path, image, fmt=None, **kw):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    image.save(path, fmt, **kw)
    return path


def rgb(seed, size=(12, 10)):
    pixels = np.random.default_rng(seed).integers(
        0, 256, (size[1], size[0], 3)).astype(np.uint8)
    return Image.fromarray(pixels)


def make_tree(root, per_class=4, classes=("cat", "dog", "emu")):
    """ImageFolder tree with RGB, grayscale and CMYK JPEGs, RGBA PNGs."""
    for split, n in (("train", per_class), ("validation", 2)):
        for c, name in enumerate(classes):
            for i in range(n):
                base = os.path.join(root, split, name, f"{i}")
                image = rgb(100 * c + i + (0 if split == "train" else 50))
                kind = i % 4
                if kind == 0:
                    save(base + ".jpg", image, quality=90)
                elif kind == 1:
                    save(base + ".jpeg", image.convert("L"))
                elif kind == 2:
                    save(base + ".JPG", image.convert("CMYK"), "JPEG")
                else:
                    save(base + ".png", image.convert("RGBA"))
    with open(os.path.join(root, "train", "cat", "notes.txt"), "w") as f:
        f.write("not an image, ignored by extension\n")
    return root


def parse_all(files):
    out = []
    for f in files:
        for raw in tf.data.TFRecordDataset(f):
            ex = tf.train.Example.FromString(raw.numpy()).features.feature
            out.append({k: v for k, v in ex.items()})
    return out


def run(args, log=None):
    lines = []
    code = br.main(args, log=lambda m: lines.append(m))
    return code, "\n".join(lines)


def test_example_bytes_round_trips_through_tensorflow():
    raw = example_proto.example_bytes({"b": b"\x00\xff", "s": "t\u00e9xt",
                                       "i": [3, -2], "f": [0.5, 1.25],
                                       "one": 7, "empty": []})
    ex = tf.train.Example.FromString(raw).features.feature
    assert ex["b"].bytes_list.value == [b"\x00\xff"]
    assert ex["s"].bytes_list.value == ["t\u00e9xt".encode()]
    assert list(ex["i"].int64_list.value) == [3, -2]
    assert list(ex["f"].float_list.value) == [0.5, 1.25]
    assert list(ex["one"].int64_list.value) == [7]
    assert list(ex["empty"].float_list.value) == []


def test_to_rgb_jpeg_keeps_rgb_jpegs_and_converts_the_rest():
    buf = io.BytesIO()
    rgb(1).save(buf, "JPEG")
    data = buf.getvalue()
    assert codec.to_rgb_jpeg(data) == (data, 10, 12)  # unchanged bytes
    for mode, fmt in (("L", "JPEG"), ("CMYK", "JPEG"), ("RGBA", "PNG"),
                      ("P", "PNG")):
        buf = io.BytesIO()
        rgb(2).convert(mode).save(buf, fmt)
        out, h, w = codec.to_rgb_jpeg(buf.getvalue())
        image = Image.open(io.BytesIO(out))
        assert (image.format, image.mode, h, w) == ("JPEG", "RGB", 10, 12)
    with pytest.raises(ValueError, match="Pillow"):
        codec.to_rgb_jpeg(b"garbage")
    buf = io.BytesIO()
    rgb(3, (64, 64)).save(buf, "JPEG")
    with pytest.raises(ValueError, match="cannot decode"):
        codec.to_rgb_jpeg(buf.getvalue()[:300])  # truncated


def test_builds_classic_shards_labels_and_verifies(tmp_path):
    src = make_tree(str(tmp_path / "src"))
    out = str(tmp_path / "out")
    with open(os.path.join(src, "train", "dog", "broken.jpg"), "wb") as f:
        f.write(b"\xff\xd8 not really")
    code, log = run([f"--input_dir={src}", f"--output_dir={out}",
                     "--train_shards=3", "--validation_shards=2",
                     "--num_workers=2", "--verify"])
    assert code == 0, log
    names = sorted(os.listdir(out))
    assert names == [".shards", "build_records.json", "labels.txt",
                     "skipped_images.txt",
                     "train-00000-of-00003", "train-00001-of-00003",
                     "train-00002-of-00003", "validation-00000-of-00002",
                     "validation-00001-of-00002"]
    assert open(os.path.join(out, "labels.txt")).read() == "cat\ndog\nemu\n"
    assert "broken.jpg" in open(os.path.join(out, "skipped_images.txt")).read()
    assert "1 unreadable image(s) were skipped" in log
    assert "verify [train]: 3 shard(s), 12 good record(s), 0 bad" in log
    assert "verify: OK" in log
    manifest = json.loads(open(os.path.join(out, "build_records.json")).read())
    assert manifest["splits"]["train"]["records"] == 12
    assert manifest["splits"]["train"]["skipped"] == 1
    assert sorted(os.listdir(os.path.join(out, ".shards"))) == [
        n + ".json" for n in names if n.startswith(("train-", "validation-"))]
    train = parse_all(classic_files(out, "train"))
    assert len(train) == 12
    by_class = {}
    for ex in train:
        label = ex["image/class/label"].int64_list.value[0]
        synset = ex["image/class/synset"].bytes_list.value[0].decode()
        by_class.setdefault(synset, set()).add(label)
        image = Image.open(io.BytesIO(ex["image/encoded"].bytes_list.value[0]))
        assert (image.format, image.mode) == ("JPEG", "RGB")
        assert ex["image/height"].int64_list.value[0] == 10
        assert ex["image/format"].bytes_list.value[0] == b"JPEG"
    assert by_class == {"cat": {1}, "dog": {2}, "emu": {3}}  # 1-based
    # Shards mix classes (seeded shuffle before slicing).
    first = parse_all([classic_files(out, "train")[0]])
    assert len({e["image/class/label"].int64_list.value[0]
                for e in first}) > 1
    # And the records builder reads them: labels 0..2.
    from official_bench.config import DatasetConfig
    ds = DatasetConfig(data_dir=out, split="validation", image_size=8,
                       num_classes=3, batch_size=6, one_hot=False)
    _, labels = next(iter(pipeline.records_dataset(
        ds, tf.distribute.InputContext(), 6, False)))
    assert sorted(labels.numpy().tolist()) == [0, 0, 1, 1, 2, 2]


def test_library_call_takes_typed_options(tmp_path):
    """A notebook builds without argparse; the CLI's defaults are the
    options' defaults."""
    src = make_tree(str(tmp_path / "src"), per_class=2)
    out = str(tmp_path / "out")
    lines = []
    opts = builder.BuildOptions(output_dir=out, input_dir=src, splits="train",
                           train_shards=2, num_workers=1)
    assert builder.build(opts, log=lines.append) == 0
    assert sorted(n for n in os.listdir(out) if n.startswith("train-")) == [
        "train-00000-of-00002", "train-00001-of-00002"]
    assert open(os.path.join(out, "labels.txt")).read() == "cat\ndog\nemu\n"
    defaults = br._parser().parse_args(["--output_dir", out])
    assert builder.BuildOptions.from_namespace(defaults) == \
        builder.BuildOptions(output_dir=out)


def test_restart_skips_finished_shards_and_never_exposes_partial_ones(
        tmp_path, monkeypatch):
    src = make_tree(str(tmp_path / "src"), per_class=4)
    out = str(tmp_path / "out")
    args = [f"--input_dir={src}", f"--output_dir={out}", "--train_shards=4",
            "--validation_shards=1", "--num_workers=1"]
    # A crash in the middle of writing shard 2: nothing under its name.
    real = shards._write_shard
    written = []

    def crashing(path, recs):
        if path.endswith("train-00002-of-00004"):
            def gen():
                yield recs[0]
                raise RuntimeError("disk full")
            return real(path, gen())
        written.append(path)
        return real(path, recs)
    monkeypatch.setattr(shards, "_write_shard", crashing)
    with pytest.raises(RuntimeError, match="disk full"):
        run(args)
    names = os.listdir(out)
    assert "train-00002-of-00004" not in names
    assert not [n for n in names if n.endswith(".tmp")]  # cleaned up
    done = {n: os.path.getmtime(os.path.join(out, n)) for n in names
            if n.startswith("train-")}
    assert done  # some shards were finished before the crash
    # A stale temporary from a killed run is removed on restart.
    stale = os.path.join(out, ".train-00003-of-00004.x1y2.tmp")
    open(stale, "wb").write(b"partial")
    monkeypatch.setattr(shards, "_write_shard", real)
    code, log = run(args + ["--verify"])
    assert code == 0, log
    assert f"{len(done)} of 4 shard(s) already complete" in log
    assert not os.path.exists(stale)
    for name, mtime in done.items():
        assert os.path.getmtime(os.path.join(out, name)) == mtime  # untouched
    assert "verify [train]: 4 shard(s), 12 good record(s)" in log
    # Changing the shard count for an output dir in progress is refused.
    code, _ = run([f"--input_dir={src}", f"--output_dir={out}",
                   "--train_shards=3", "--validation_shards=1"])
    assert code == 2


def test_a_stop_between_a_temporarys_creation_and_its_cleanup_leaves_none(
        tmp_path, monkeypatch):
    """A signal that lands after a shard's temporary exists but before the
    writer could remove it (the SIGTERM test below saw one on 2026-11-29):
    the build removes it on the way out."""
    src = make_tree(str(tmp_path / "src"), per_class=2)
    out = str(tmp_path / "out")

    def stopped(path, records):
        open(os.path.join(os.path.dirname(path),
                          f".{os.path.basename(path)}.abc123.tmp"), "wb")
        raise br.Interrupted(signal.SIGTERM)
    monkeypatch.setattr(shards, "_write_shard", stopped)
    with pytest.raises(br.Interrupted):
        builder.build(builder.BuildOptions(
            output_dir=out, input_dir=src, splits="train", train_shards=2,
            num_workers=1), log=lambda line: None)
    assert [n for n in os.listdir(out) if n.endswith(".tmp")] == []


def test_shards_without_skip_records_are_reported_not_miscounted(tmp_path):
    """Shards from an older builder (no .shards/ records): the re-run says
    their skipped images are unknown and --verify does not guess counts."""
    src = make_tree(str(tmp_path / "src"), per_class=2)
    out = str(tmp_path / "out")
    args = [f"--input_dir={src}", f"--output_dir={out}", "--splits=train",
            "--train_shards=2", "--num_workers=1"]
    assert run(args)[0] == 0
    import shutil
    shutil.rmtree(os.path.join(out, ".shards"))
    code, log = run(args + ["--verify"])
    assert code == 0, log
    assert "2 shard(s) have no record of skipped images" in log
    assert "record count not compared" in log
    manifest = json.loads(open(os.path.join(out, "build_records.json")).read())
    assert "records" not in manifest["splits"]["train"]


def test_imagenet_layout_flat_validation_labels_and_boxes(tmp_path):
    train = tmp_path / "train"
    for s, synset in enumerate(("n01", "n02")):
        for i in range(2):
            save(str(train / synset / f"{synset}_{i}.JPEG"), rgb(s * 10 + i),
                 "JPEG")
    val = tmp_path / "val"
    for i in range(3):
        save(str(val / f"ILSVRC2012_val_{i + 1:08d}.JPEG"), rgb(90 + i),
             "JPEG")
    labels = tmp_path / "val_labels.txt"
    labels.write_text("n02\nn01\nn02\n")  # sorted file order
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("n01_0.JPEG,0.1,0.2,0.6,0.7\nn01_0.JPEG,0.0,0.0,0.5,0.5\n")
    out = str(tmp_path / "out")
    code, log = run(["--layout=imagenet", f"--train_dir={train}",
                     f"--validation_dir={val}",
                     f"--validation_labels={labels}",
                     f"--bounding_boxes={boxes}", f"--output_dir={out}",
                     "--train_shards=2", "--validation_shards=1",
                     "--num_workers=1"])
    assert code == 0, log
    val_ex = parse_all(classic_files(out, "validation"))
    got = {e["image/filename"].bytes_list.value[0].decode():
           e["image/class/label"].int64_list.value[0] for e in val_ex}
    assert got == {"ILSVRC2012_val_00000001.JPEG": 2,
                   "ILSVRC2012_val_00000002.JPEG": 1,
                   "ILSVRC2012_val_00000003.JPEG": 2}
    boxed = [e for e in parse_all(classic_files(out, "train"))
             if e["image/filename"].bytes_list.value[0] == b"n01_0.JPEG"]
    assert list(boxed[0]["image/object/bbox/xmin"].float_list.value) == \
        pytest.approx([0.1, 0.0])
    assert list(boxed[0]["image/object/bbox/ymax"].float_list.value) == \
        pytest.approx([0.7, 0.5])
    # "<file> <class>" label lines work too.
    labels.write_text("ILSVRC2012_val_00000003.JPEG n01\n"
                      "ILSVRC2012_val_00000001.JPEG n01\n"
                      "ILSVRC2012_val_00000002.JPEG n02\n")
    out2 = str(tmp_path / "out2")
    code, _ = run(["--layout=imagenet", f"--train_dir={train}",
                   f"--validation_dir={val}", f"--validation_labels={labels}",
                   f"--output_dir={out2}", "--splits=validation",
                   "--validation_shards=1", "--num_workers=1"])
    assert code == 0
    got = {e["image/filename"].bytes_list.value[0].decode():
           e["image/class/label"].int64_list.value[0]
           for e in parse_all(classic_files(out2, "validation"))}
    assert got["ILSVRC2012_val_00000003.JPEG"] == 1


def test_verify_only_reports_a_corrupt_shard(tmp_path):
    src = make_tree(str(tmp_path / "src"), per_class=2)
    out = str(tmp_path / "out")
    assert run([f"--input_dir={src}", f"--output_dir={out}",
                "--train_shards=2", "--validation_shards=1",
                "--num_workers=1"])[0] == 0
    shard = os.path.join(out, "train-00001-of-00002")
    data = open(shard, "rb").read()
    open(shard, "wb").write(data[:-20])
    code, log = run([f"--output_dir={out}", "--verify"])
    assert code == 1
    assert f"BAD {shard} record" in log and "corrupt or truncated" in log
    assert "expected 6 records" in log


def test_bad_arguments_exit_2(tmp_path, capsys):
    assert br.main([f"--output_dir={tmp_path}"]) == 2
    assert "give --input_dir" in capsys.readouterr().err
    src = make_tree(str(tmp_path / "src"), per_class=1)
    assert br.main([f"--input_dir={src}", f"--output_dir={tmp_path}/o",
                    "--train_shards=50", "--num_workers=1"]) == 2
    assert "--train_shards 50: must be 1..3" in capsys.readouterr().err
    assert br.main([f"--input_dir={src}", f"--output_dir={tmp_path}/p",
                    "--layout=imagenet", "--num_workers=1"]) == 2
    assert "--validation_labels" in capsys.readouterr().err


def test_cli_module_runs_with_progress_output(tmp_path):
    src = make_tree(str(tmp_path / "src"), per_class=2)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "official_bench.data.build.build_records",
         f"--input_dir={src}", f"--output_dir={out}", "--train_shards=2",
         "--validation_shards=1", "--num_workers=2"],
        cwd=REPO, capture_output=True, text=True, timeout=240,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr
    assert "[train] [" in proc.stderr and "6/6 images (100.0%)" in proc.stderr
    manifest = json.loads((out / "build_records.json").read_text())
    assert manifest["splits"]["train"] == {"images": 6, "shards": 2,
                                           "seed": 12345, "records": 6,
                                           "skipped": 0}
    assert manifest["classes"] == ["cat", "dog", "emu"]


# --------------------------------------------------------------------------
# Without Pillow: TensorFlow converts; TIFF says what to install
# --------------------------------------------------------------------------


def test_tensorflow_path_converts_like_pillow_and_keeps_rgb_jpegs():
    buf = io.BytesIO()
    rgb(1).save(buf, "JPEG")
    data = buf.getvalue()
    assert codec.tf_to_rgb_jpeg(data) == (data, 10, 12)  # unchanged bytes
    for mode, fmt in (("L", "JPEG"), ("CMYK", "JPEG"), ("RGBA", "PNG"),
                      ("P", "PNG"), ("RGB", "BMP"), ("RGB", "GIF")):
        buf = io.BytesIO()
        source = rgb(2).convert(mode)
        source.save(buf, fmt)
        out, h, w = codec.tf_to_rgb_jpeg(buf.getvalue())
        image = Image.open(io.BytesIO(out))
        assert (image.format, image.mode, h, w) == ("JPEG", "RGB", 10, 12)
        want, _, _ = codec.pillow_to_rgb_jpeg(buf.getvalue())
        diff = np.abs(np.asarray(image, int) -
                      np.asarray(Image.open(io.BytesIO(want)), int))
        assert diff.mean() < 8, (mode, fmt)  # same picture, JPEG noise
    # Alpha is composited on white: a fully transparent PNG becomes white.
    buf = io.BytesIO()
    Image.new("RGBA", (8, 8), (0, 0, 0, 0)).save(buf, "PNG")
    out, _, _ = codec.tf_to_rgb_jpeg(buf.getvalue())
    assert np.asarray(Image.open(io.BytesIO(out))).min() > 245
    with pytest.raises(ValueError, match="not an image format"):
        codec.tf_to_rgb_jpeg(b"garbage")
    buf = io.BytesIO()
    rgb(3, (64, 64)).save(buf, "JPEG")
    with pytest.raises(ValueError, match="cannot decode"):
        codec.tf_to_rgb_jpeg(buf.getvalue()[:300])  # truncated
    buf = io.BytesIO()
    rgb(4).save(buf, "TIFF")
    with pytest.raises(codec.NeedsPillow, match=r"x\.tif: a TIFF image needs "
                       r"Pillow.*pip install 'official_bench\[builder\]'"):
        codec.tf_to_rgb_jpeg(buf.getvalue(), path="/in/x.tif")


def _no_pillow_env(tmp_path):
    """The CLI and its spawned workers (fresh interpreters) all start
    without Pillow."""
    return without_module_env(tmp_path, "PIL", {"TF_CPP_MIN_LOG_LEVEL": "2"})


def _cli(args, env, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "official_bench.data.build.build_records"]
        + args,
        cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow
def test_builds_without_pillow_and_names_what_to_install(tmp_path):
    env = _no_pillow_env(tmp_path)
    check = subprocess.run([sys.executable, "-c", "import PIL"], env=env,
                           capture_output=True, text=True, cwd=REPO)
    assert check.returncode != 0 and "No module named 'PIL'" in check.stderr
    src = tmp_path / "src"
    originals = {}
    for c, name in enumerate(("cat", "dog")):
        for i in range(3):
            path = save(str(src / "train" / name / f"{i}.jpg"),
                        rgb(10 * c + i), "JPEG")
            originals[f"{i}.jpg", name] = open(path, "rb").read()
    save(str(src / "train" / "cat" / "gray.jpg"), rgb(7).convert("L"), "JPEG")
    save(str(src / "train" / "dog" / "cmyk.jpg"), rgb(8).convert("CMYK"),
         "JPEG")
    save(str(src / "train" / "dog" / "alpha.png"), rgb(9).convert("RGBA"))
    out = tmp_path / "out"
    proc = _cli([f"--input_dir={src}", f"--output_dir={out}", "--splits=train",
                 "--train_shards=2", "--num_workers=1", "--verify"], env)
    assert proc.returncode == 0, proc.stderr
    assert "Pillow is not installed" in proc.stdout
    assert "verify: OK" in proc.stdout
    examples = parse_all(classic_files(str(out), "train"))
    assert len(examples) == 9
    for ex in examples:
        encoded = ex["image/encoded"].bytes_list.value[0]
        key = (ex["image/filename"].bytes_list.value[0].decode(),
               ex["image/class/synset"].bytes_list.value[0].decode())
        if key in originals:
            assert encoded == originals[key]  # passed through unchanged
        image = Image.open(io.BytesIO(encoded))
        assert (image.format, image.mode) == ("JPEG", "RGB")
    # A TIFF only Pillow reads: one error line naming it and the extra.
    tiff = save(str(src / "train" / "cat" / "scan.tif"), rgb(11), "TIFF")
    out2 = tmp_path / "out2"
    proc = _cli([f"--input_dir={src}", f"--output_dir={out2}",
                 "--splits=train", "--train_shards=1", "--num_workers=1"], env)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines()
              if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert tiff in errors[0]
    assert "pip install 'official_bench[builder]'" in errors[0]
    assert [n for n in os.listdir(out2)
            if n.startswith("train-") or n.endswith(".tmp")] == []


# --------------------------------------------------------------------------
# Killed builds: no orphan workers, nothing lost on the re-run
# --------------------------------------------------------------------------


def _slow_tree(root, images=48, classes=("a", "b")):
    """Big RGBA PNGs (about 0.3 s each to convert), hard-linked copies of
    one file so the tree is quick to make but slow to build."""
    n = 2000
    x = np.linspace(0, 255, n, dtype=np.float32)
    pixels = np.stack([np.add.outer(x, x) / 2, np.add.outer(x, -x) % 256,
                       np.tile(x, (n, 1)), np.full((n, n), 200.0)], -1)
    master = os.path.join(root, "master.png")
    os.makedirs(root, exist_ok=True)
    Image.fromarray(pixels.astype(np.uint8), "RGBA").save(master,
                                                          compress_level=1)
    for i in range(images):
        folder = os.path.join(root, "train", classes[i % len(classes)])
        os.makedirs(folder, exist_ok=True)
        os.link(master, os.path.join(folder, f"{i:03d}.png"))
    return root


def _proc_stat(pid):
    """(state, ppid, start time) from /proc/<pid>/stat, or None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return fields[0], int(fields[1]), fields[19]


def _children(pid):
    """{child pid: start time} of `pid`, from every /proc/<n>/stat."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _proc_stat(int(name))
            if stat and stat[1] == pid and stat[0] not in "ZX":
                out[int(name)] = stat[2]
    return out


def _alive(children):
    """Those of `children` still running (zombies count as dead)."""
    alive = []
    for pid, start in children.items():
        stat = _proc_stat(pid)
        if stat and stat[2] == start and stat[0] not in "ZX":
            alive.append(pid)
    return alive


def _start_builder(src, out, workers, shards=8, new_session=False):
    return subprocess.Popen(
        [sys.executable, "-m", "official_bench.data.build.build_records",
         f"--input_dir={src}", f"--output_dir={out}", "--splits=train",
         f"--train_shards={shards}", f"--num_workers={workers}"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        start_new_session=new_session)


def _wait_for(condition, proc, timeout=180, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if proc.poll() is not None:
            pytest.fail(f"builder exited ({proc.returncode}) before {what}: "
                        f"{proc.communicate()[1][-2000:]}")
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def _shards_done(out):
    return sorted(n for n in os.listdir(out) if n.startswith("train-")) \
        if os.path.isdir(out) else []


def _kill_tree(proc, children):
    """Test cleanup: SIGKILL the builder and any survivors we know of."""
    for pid in [proc.pid] + list(children):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.communicate(timeout=30)


def _exits_with_children(proc, children, after: str) -> str:
    """The builder exits within 30 s of `after` and its children within
    10 s of it; returns its stderr."""
    deadline = time.monotonic() + 10
    try:
        _, stderr = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the builder did not exit within 30 s of {after}")
    while _alive(children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive(children) == [], "workers outlived the builder"
    return stderr


@pytest.fixture(scope="module")
def slow_tree(tmp_path_factory):
    return _slow_tree(str(tmp_path_factory.mktemp("slow")))


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM,
                                    signal.SIGINT])
def test_workers_die_with_the_killed_builder(slow_tree, tmp_path, signum):
    """SIGKILL/SIGTERM go to the main process only; SIGINT, like Ctrl-C in
    a terminal, to the whole process group (workers included)."""
    out = str(tmp_path / "out")
    ctrl_c = signum == signal.SIGINT
    proc = _start_builder(slow_tree, out, workers=2, new_session=ctrl_c)
    children = {}
    try:
        # Mid-run: both workers converting and a first shard written.
        _wait_for(lambda: len(_children(proc.pid)) >= 3 and _shards_done(out),
                  proc, what="two workers and a finished shard")
        children = _children(proc.pid)  # workers + resource tracker
        assert len(_shards_done(out)) < 8, "built before the kill: too fast"
        if ctrl_c:
            os.killpg(proc.pid, signum)
        else:
            os.kill(proc.pid, signum)
        stderr = _exits_with_children(proc, children,
                                      signal.Signals(signum).name)
    finally:
        if proc.returncode is None:
            _kill_tree(proc, children)
    if signum != signal.SIGKILL:
        assert proc.returncode == 128 + signum, stderr
        assert (f"build_records: stopped by {signal.Signals(signum).name}; "
                "finished shards are kept") in stderr
        assert "Traceback" not in stderr, stderr
        assert [n for n in os.listdir(out) if n.endswith(".tmp")] == []
    else:
        assert proc.returncode == -signal.SIGKILL
    # Whatever a shard's name shows is complete and has its skip record.
    for name in _shards_done(out):
        assert os.path.exists(os.path.join(out, ".shards", name + ".json"))


@pytest.mark.slow
def test_a_killed_worker_fails_the_build_with_its_name(slow_tree, tmp_path):
    """The out-of-memory killer takes one worker: the builder says which
    and how, exits 1 and keeps finished shards, instead of waiting for
    shards that never come or printing a BrokenProcessPool traceback."""
    out = str(tmp_path / "out")
    proc = _start_builder(slow_tree, out, workers=2)
    children = {}
    try:
        _wait_for(lambda: len(_children(proc.pid)) >= 3 and _shards_done(out),
                  proc, what="two workers and a finished shard")
        children = _children(proc.pid)
        workers = [pid for pid in children if "spawn_main" in
                   open(f"/proc/{pid}/cmdline").read()]
        assert len(workers) == 2, children
        os.kill(workers[0], signal.SIGKILL)
        stderr = _exits_with_children(proc, children, "a worker's SIGKILL")
    finally:
        if proc.returncode is None:
            _kill_tree(proc, children)
    assert proc.returncode == 1, stderr
    assert f"worker {workers[0]} was killed by SIGKILL" in stderr, stderr
    assert "re-run the same command" in stderr
    assert "Traceback" not in stderr, stderr
    assert [n for n in os.listdir(out) if n.endswith(".tmp")] == []
    for name in _shards_done(out):
        assert os.path.exists(os.path.join(out, ".shards", name + ".json"))


@pytest.mark.slow
def test_skipped_list_survives_a_kill_and_the_rerun(slow_tree, tmp_path):
    src = str(tmp_path / "src")
    os.makedirs(src)
    # A copy of the tree (links) where the first image of shards 0 and 1 is
    # garbage; with one worker the shards finish in order, so both are
    # finished, and never rebuilt, before the kill.
    for cls in ("a", "b"):
        os.makedirs(os.path.join(src, "train", cls))
        for name in os.listdir(os.path.join(slow_tree, "train", cls)):
            os.link(os.path.join(slow_tree, "train", cls, name),
                    os.path.join(src, "train", cls, name))
    items = sources.list_folder_split(os.path.join(src, "train"), ["a", "b"])
    assigned = shards.assign_shards(items, 8, 12345)
    bad = [assigned[0][0].path, assigned[1][0].path]
    for path in bad:
        os.remove(path)
        with open(path, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n but not really")
    out = str(tmp_path / "out")
    proc = _start_builder(src, out, workers=1)
    try:
        _wait_for(lambda: "train-00001-of-00008" in _shards_done(out), proc,
                  what="shard 1")
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.returncode is None:
            _kill_tree(proc, {})
    assert len(_shards_done(out)) < 8, "built before the kill: too fast"
    # An unfinished build does not pass --verify.
    code, log = run([f"--output_dir={out}", "--splits=train", "--verify"])
    assert code == 1 and "shard(s) missing" in log, log
    code, log = run([f"--input_dir={src}", f"--output_dir={out}",
                     "--splits=train", "--train_shards=8", "--num_workers=2",
                     "--verify"])
    assert code == 0, log
    listed = open(os.path.join(out, "skipped_images.txt")).read()
    assert sorted(line.split("\t")[0] for line in listed.splitlines()) == \
        sorted(bad)
    assert "2 unreadable image(s) were skipped" in log
    assert "verify [train]: 8 shard(s), 46 good record(s), 0 bad" in log
    assert "verify: OK" in log
    manifest = json.loads(open(os.path.join(out, "build_records.json")).read())
    assert manifest["splits"]["train"]["records"] == 46
    assert manifest["splits"]["train"]["skipped"] == 2
