"""Section 7: real images -> build_records CLI -> the training CLI learns them.

scikit-learn ships the UCI handwritten digits (1797 8x8 grayscale images,
10 classes). They are upscaled to 32x32, saved as grayscale JPEGs in an
ImageFolder tree, written as TFRecords by `python -m
official_bench.data.build.build_records` (which converts them to RGB JPEG), and
a small resnet_cifar is trained on them through `python -m
official_bench.classifier_trainer` with `builder: records`. Validation
top-1 must clear 80% (chance is 10%); docs/design.md ("Preprocessing
constants") measured ~99.7% for this set-up without ImageNet-style
augmentation, which is why the crop, flip and eval padding are switched off
here.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="scikit-learn (test extra) is needed")
pytest.importorskip("PIL", reason="Pillow (test/builder extra) is needed")

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NUM_TRAIN = 1500
IMAGE_SIZE = 32


def write_digits_tree(root):
    """train/<digit>/*.jpg (1500 images) and validation/<digit>/*.jpg (297)."""
    from PIL import Image
    from sklearn.datasets import load_digits
    digits = load_digits()
    order = np.random.default_rng(0).permutation(len(digits.images))
    counts = {"train": 0, "validation": 0}
    for rank, i in enumerate(order):
        split = "train" if rank < NUM_TRAIN else "validation"
        label = int(digits.target[i])
        pixels = (digits.images[i] * (255.0 / 16.0)).astype(np.uint8)
        image = Image.fromarray(pixels, mode="L").resize(
            (IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR)
        folder = os.path.join(root, split, str(label))
        os.makedirs(folder, exist_ok=True)
        image.save(os.path.join(folder, f"{i:04d}.jpg"), quality=95)
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
    assert counts == {"train": NUM_TRAIN, "validation": 297}

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
        "validation_dataset": dict(data, num_examples=297, batch_size=99),
        "model": {"model_params": {"depth": 8},
                  "optimizer": {"name": "momentum", "momentum": 0.9},
                  "learning_rate": {"name": "cosine_with_warmup",
                                    "initial_lr": 0.8, "warmup_epochs": 1}},
        "train": {"epochs": 8,
                  "time_history": {"log_steps": 30}},
        "evaluation": {"epochs_between_evals": 8},
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
