"""Small TFRecord shards of noisy JPEGs, in the classic ImageNet schema."""

import io
import os

import numpy as np

from official_bench.data.build.example_proto import classic_example
from official_bench.runtime.keras_setup import tf


def noisy_jpeg(seed, size=12):
    from PIL import Image
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (size, size, 3)).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", quality=95)
    return buf.getvalue()


def write_records(root, count=8):
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, "train-00000-of-00001")
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(count):
            writer.write(classic_example(noisy_jpeg(i), 1 + i % 3, 12, 12))
    return str(root)


def train_on_records(data_dir, model_dir, batch, examples, shuffle,
                     **train_keys):
    """The trainer CLI on a tiny CIFAR ResNet (depth 8) reading the 8x8,
    2-class classic records in `data_dir` (`train_keys`: more of
    train_dataset's keys); the finished process."""
    import json
    import subprocess
    import sys

    from official_bench.contracts.trainer_command import trainer_argv
    from support.helpers import REPO
    override = {
        "runtime": {"distribution_strategy": "one_device", "num_gpus": 0},
        "train_dataset": {"builder": "records", "image_size": 8,
                          "num_classes": 2, "batch_size": batch,
                          "num_examples": examples,
                          "shuffle_buffer_size": shuffle, **train_keys},
        "validation_dataset": {"builder": "records", "image_size": 8,
                               "num_classes": 2},
        "model": {"model_params": {"depth": 8}}, "train": {"epochs": 1}}
    return subprocess.run(
        trainer_argv(sys.executable, mode="train", model_dir=model_dir,
                     params_override=json.dumps(override),
                     extra=["--model_type=resnet_cifar", "--dataset=cifar10",
                            f"--data_dir={data_dir}"]),
        cwd=REPO, capture_output=True, text=True, timeout=240,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
