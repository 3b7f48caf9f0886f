"""ImageNet-like JPEGs and record sets made of them, for the
TensorFlow-free reader's tests and benchmarks/host_decoders.py: smooth
colour fields, a few discs and per-pixel noise, so that a 500x375 JPEG at
quality 90 is ~110 KB as ImageNet's are (pure noise would be far larger,
flat colour far smaller)."""

import io
import os

import numpy as np

# The bound the tests assert on our eval images against TensorFlow's: mean
# absolute difference (0..255) per decoder. simplejpeg decodes TensorFlow's
# pixels (its integer-fast DCT), so only the resize differs: warpAffine
# samples at 1/32 pixel, a unit off here and there (0.01 measured at
# 500x375, up to 0.1 on small, noisy crops). OpenCV and Pillow use
# libjpeg's accurate DCT: ~1 unit away.
EVAL_MAD = {"simplejpeg": 0.15, "opencv": 1.5, "pillow": 1.5,
            # libjpeg-turbo's accurate integer DCT where TensorFlow uses the
            # fast one: 0.95-1.00 measured on natural_jpeg images.
            "nvimgcodec_cpu": 1.2,
            # nvJPEG on a GPU: not measured here (no GPU); its bound is
            # nvimgcodec_cpu's with the margin OpenCV and Pillow have.
            "nvimgcodec": 1.5}


def natural_pixels(seed, width=500, height=375, noise=25.0):
    from PIL import Image
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (6, 8, 3)).astype(np.uint8)
    pixels = np.asarray(Image.fromarray(base).resize((width, height),
                                                     Image.BICUBIC),
                        dtype=np.float32).copy()
    yy, xx = np.mgrid[0:height, 0:width]
    for _ in range(6):
        cx, cy = rng.integers(0, width), rng.integers(0, height)
        radius = rng.integers(max(2, min(width, height) // 20),
                              max(3, min(width, height) // 3))
        inside = (xx - cx) ** 2 + (yy - cy) ** 2 < radius ** 2
        pixels[inside] = 0.5 * pixels[inside] + 0.5 * rng.integers(0, 256, 3)
    pixels += rng.normal(0, noise, pixels.shape).astype(np.float32)
    return np.clip(pixels, 0, 255).astype(np.uint8)


def natural_jpeg(seed, width=500, height=375, quality=90, mode="RGB"):
    """JPEG bytes; `mode` "L" or "CMYK" converts before encoding."""
    from PIL import Image
    image = Image.fromarray(natural_pixels(seed, width, height))
    if mode != "RGB":
        image = image.convert(mode)
    buf = io.BytesIO()
    image.save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def image_folder(root, classes=3, train=12, validation=4, width=500,
                 height=375, seed=0):
    """root/{train,validation}/c<k>/<i>.jpg; every third image portrait."""
    for split, count in (("train", train), ("validation", validation)):
        for c in range(classes):
            folder = os.path.join(root, split, f"c{c}")
            os.makedirs(folder, exist_ok=True)
            for i in range(count):
                w, h = (width, height) if i % 3 else (height, width)
                salt = (seed * 1000 + c) * 1000 + i + (0 if split == "train"
                                                       else 500)
                with open(os.path.join(folder, f"{i}.jpg"), "wb") as f:
                    f.write(natural_jpeg(salt, w, h))
    return root


def record_set(root, train_shards=4, validation_shards=2, **folder):
    """Records of a natural image folder, written by the project's builder
    (official-bench-build-records): root/records."""
    from official_bench.data.build.builder import BuildOptions, build
    source = image_folder(os.path.join(root, "images"), **folder)
    out = os.path.join(root, "records")
    build(BuildOptions(output_dir=out, input_dir=source,
                       train_shards=train_shards,
                       validation_shards=validation_shards, num_workers=1),
          log=lambda *a: None)
    return out
