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
