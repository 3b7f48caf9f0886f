"""Section 7: real images -> build_records CLI -> the training CLI learns them.

Digits drawn here (a 5x7 glyph per digit, scaled, stretched, rotated,
shifted, dimmed and noised at random: 1797 32x32 grayscale images, 10
classes, seeded) are saved as JPEGs in an ImageFolder tree, written as
TFRecords by `python -m official_bench.data.build.build_records` (which
converts them to RGB JPEG), and a small resnet_cifar is trained on them
through `python -m official_bench.classifier_trainer` with `builder:
records`. Validation top-1 must clear 80% (chance is 10%). The crop, flip
and eval padding are off: docs/data.md ("Small images") says why.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("PIL", reason="Pillow (test/builder extra) is needed")

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NUM_TRAIN, NUM_VALIDATION = 1500, 297
IMAGE_SIZE = 32
GLYPHS = {  # 5x7, "1" = ink
    0: ["01110", "10001", "10011", "10101", "11001", "10001", "01110"],
    1: ["00100", "01100", "00100", "00100", "00100", "00100", "01110"],
    2: ["01110", "10001", "00001", "00010", "00100", "01000", "11111"],
    3: ["11111", "00010", "00100", "00010", "00001", "10001", "01110"],
    4: ["00010", "00110", "01010", "10010", "11111", "00010", "00010"],
    5: ["11111", "10000", "11110", "00001", "00001", "10001", "01110"],
    6: ["00110", "01000", "10000", "11110", "10001", "10001", "01110"],
    7: ["11111", "00001", "00010", "00100", "01000", "01000", "01000"],
    8: ["01110", "10001", "10001", "01110", "10001", "10001", "01110"],
    9: ["01110", "10001", "10001", "01111", "00001", "00010", "01100"],
}


def draw_digit(label, rng):
    """One IMAGE_SIZE x IMAGE_SIZE grayscale digit, varied at random."""
    from PIL import Image
    ink = np.array([[c == "1" for c in row] for row in GLYPHS[label]],
                   np.uint8) * 255
    scale = rng.uniform(0.7, 1.0)
    width = max(6, int(20 * scale * rng.uniform(0.85, 1.15)))
    glyph = Image.fromarray(ink).resize((20, 28), Image.NEAREST).resize(
        (width, max(8, int(28 * scale))), Image.BILINEAR).rotate(
        rng.uniform(-12, 12), resample=Image.BILINEAR, expand=True)
    canvas = Image.new("L", (IMAGE_SIZE, IMAGE_SIZE))
    canvas.paste(glyph, (int(rng.integers(0, IMAGE_SIZE - glyph.width + 1)),
                         int(rng.integers(0,
                                          IMAGE_SIZE - glyph.height + 1))))
    pixels = np.asarray(canvas, np.float32) * rng.uniform(0.6, 1.0) \
        + rng.normal(0, 20, (IMAGE_SIZE, IMAGE_SIZE))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def write_digits_tree(root):
    """train/<digit>/*.jpg (NUM_TRAIN images) and validation/<digit>/*.jpg
    (NUM_VALIDATION), labels in turn."""
    rng = np.random.default_rng(0)
    counts = {"train": 0, "validation": 0}
    for i in range(NUM_TRAIN + NUM_VALIDATION):
        split = "train" if i < NUM_TRAIN else "validation"
        label = i % 10
        folder = os.path.join(root, split, str(label))
        os.makedirs(folder, exist_ok=True)
        draw_digit(label, rng).save(os.path.join(folder, f"{i:04d}.jpg"),
                                    quality=95)
        counts[split] += 1
    return counts


def _run(args, timeout):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable] + args, cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_resnet_cifar_learns_digits_from_tfrecords(tmp_path):
    images, records, model_dir = (tmp_path / "images", tmp_path / "records",
                                  tmp_path / "model")
    counts = write_digits_tree(str(images))
    assert counts == {"train": NUM_TRAIN, "validation": NUM_VALIDATION}

    built = _run(["-m", "official_bench.data.build.build_records",
                  f"--input_dir={images}", f"--output_dir={records}",
                  "--train_shards=4", "--validation_shards=2",
                  "--num_workers=2", "--verify"], timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "verify: OK" in built.stdout
    labels = (records / "labels.txt").read_text().split()
    assert labels == [str(d) for d in range(10)]

    batch = 50
    data = {"builder": "records", "image_size": IMAGE_SIZE, "num_classes": 10,
            "batch_size": batch, "crop_area_range": [1.0, 1.0],
            "random_flip": False, "eval_crop_padding": 0,
            "mean_subtract": True, "standardize": True,
            "shuffle_buffer_size": 2000}
    override = {
        "runtime": {"distribution_strategy": "one_device", "num_gpus": 0,
                    "seed": 1},
        "train_dataset": dict(data, num_examples=NUM_TRAIN),
        "validation_dataset": dict(data, num_examples=NUM_VALIDATION,
                                  batch_size=99),
        "model": {"model_params": {"depth": 8},
                  "optimizer": {"name": "momentum", "momentum": 0.9},
                  "learning_rate": {"name": "cosine_with_warmup",
                                    "initial_lr": 0.8, "warmup_epochs": 1}},
        "train": {"epochs": 5,
                  "time_history": {"log_steps": 30}},
        "evaluation": {"epochs_between_evals": 5},
    }
    trained = _run(["-m", "official_bench.classifier_trainer",
                    "--mode=train_and_eval", "--model_type=resnet_cifar",
                    "--dataset=cifar10", f"--data_dir={records}",
                    f"--model_dir={model_dir}",
                    f"--params_override={json.dumps(override)}"],
                   timeout=360)
    assert trained.returncode == 0, trained.stderr[-4000:]
    result = json.loads((model_dir / "result.json").read_text())
    assert result["config"]["train_dataset"]["builder"] == "records"
    evaluation = result["evaluation"]
    assert evaluation["accuracy"] > 0.8, evaluation
    assert evaluation["top_5_accuracy"] >= evaluation["accuracy"]
