"""Source images -> RGB JPEG bytes for the TFRecord builder.

Pillow (the `builder` extra) is used when it is installed: it is light in
the worker processes and reads every format the builder lists. Without it,
TensorFlow decodes JPEG (RGB, grayscale, CMYK), PNG, GIF, BMP and WebP and
re-encodes them, so a plain image folder builds without the extra; only
formats TensorFlow cannot read (TIFF, PPM/PGM) raise NeedsPillow, which the
builder turns into one error line saying what to install.

RGB JPEGs are stored unchanged on both paths; the rest become RGB JPEGs
(alpha composited on white). Every image is decoded completely, so
truncated or corrupt files raise ValueError and are skipped by the caller.
"""

from __future__ import annotations

import io
import os
from typing import Optional, Tuple

from official_bench.data.build.worker_pool import WORKER_ENV

INSTALL_HINT = "pip install 'official_bench[builder]'"


class NeedsPillow(Exception):
    """An image only Pillow can convert, and Pillow is not installed.

    Not a ValueError: the builder must stop (exit 2), not skip the file.
    """

    def __init__(self, path: str, kind: str):
        super().__init__(path, kind)
        self.path, self.kind = path, kind

    def __str__(self) -> str:
        return (f"{self.path}: a {self.kind} image needs Pillow to convert, "
                f"which is not installed; {INSTALL_HINT} (or remove the "
                "file)")


def pillow_available() -> bool:
    """True when `import PIL` works (the `builder` extra is installed)."""
    try:
        import PIL  # noqa: F401
    except ImportError:
        return False
    return True


def to_rgb_jpeg(data: bytes, quality: int = 95,
                path: str = "") -> Tuple[bytes, int, int]:
    """(JPEG bytes, height, width): RGB JPEGs unchanged, the rest converted.

    Raises ValueError when the image cannot be decoded completely and
    NeedsPillow (naming `path`) when only Pillow could read it.
    """
    if pillow_available():
        return pillow_to_rgb_jpeg(data, quality)
    return tf_to_rgb_jpeg(data, quality, path)


# --------------------------------------------------------------------------
# Pillow
# --------------------------------------------------------------------------


def pillow_to_rgb_jpeg(data: bytes, quality: int = 95) -> Tuple[bytes, int,
                                                                 int]:
    """The Pillow path: every format Pillow reads."""
    from PIL import Image
    try:
        image = Image.open(io.BytesIO(data))
        fmt = image.format
        image.load()  # decodes everything: truncated files fail here
    except Image.UnidentifiedImageError as e:
        raise ValueError("not an image format Pillow can read") from e
    except Exception as e:  # PIL raises many kinds
        raise ValueError(f"cannot decode: {type(e).__name__}: {e}") from e
    if fmt == "JPEG" and image.mode == "RGB":
        return data, image.height, image.width
    if image.mode in ("RGBA", "LA") or (image.mode == "P" and
                                        "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGB", rgba.size, (255, 255, 255))
        background.paste(rgba, mask=rgba.split()[-1])
        image = background
    else:
        image = image.convert("RGB")
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality)
    return out.getvalue(), image.height, image.width


# --------------------------------------------------------------------------
# TensorFlow
# --------------------------------------------------------------------------

# Magic bytes -> format name; TF_FORMATS are the ones tf.io.decode_image reads.
_MAGIC = ((b"\xff\xd8\xff", "JPEG"), (b"\x89PNG\r\n\x1a\n", "PNG"),
          (b"GIF87a", "GIF"), (b"GIF89a", "GIF"), (b"BM", "BMP"),
          (b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"))
TF_FORMATS = ("JPEG", "PNG", "GIF", "BMP", "WEBP")


def sniff_format(data: bytes) -> Optional[str]:
    """The image format from the first bytes, or None if unrecognised."""
    for magic, name in _MAGIC:
        if data.startswith(magic):
            return name
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    if len(data) > 2 and data[:1] == b"P" and data[1:2] in b"123456" \
            and data[2:3].isspace():
        return "PPM/PGM"
    return None


def jpeg_components(data: bytes) -> Optional[int]:
    """Colour components of a JPEG from its SOF header (3 = RGB/YCbCr,
    1 = grayscale, 4 = CMYK), or None if no frame header is found."""
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = int.from_bytes(data[i + 2:i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return data[i + 9] if i + 9 < len(data) else None
        if marker == 0xDA:  # scan before any frame header
            return None
        i += 2 + length
    return None


_tf = None


def _tensorflow():
    """TensorFlow, imported on first use: quiet, CPU only, one thread (a
    worker process is one of several, so TF must not grab GPUs or cores)."""
    global _tf
    if _tf is None:
        import tensorflow as tf
        if os.environ.get(WORKER_ENV):
            try:
                tf.config.set_visible_devices([], "GPU")
                tf.config.threading.set_intra_op_parallelism_threads(1)
                tf.config.threading.set_inter_op_parallelism_threads(1)
            except RuntimeError:  # already initialised: leave it
                pass
        _tf = tf
    return _tf


def tf_to_rgb_jpeg(data: bytes, quality: int = 95,
                   path: str = "") -> Tuple[bytes, int, int]:
    """The TensorFlow path: JPEG, PNG, GIF, BMP, WebP; NeedsPillow else."""
    fmt = sniff_format(data)
    if fmt is None:
        raise ValueError("not an image format the builder can read")
    if fmt not in TF_FORMATS:
        raise NeedsPillow(path or "<image>", fmt)
    tf = _tensorflow()
    try:
        pixels = tf.io.decode_image(data, channels=0,
                                    expand_animations=False).numpy()
    except (tf.errors.InvalidArgumentError, ValueError) as e:
        message = str(e).strip().splitlines()[-1] if str(e).strip() else ""
        raise ValueError(f"cannot decode: {message[:200]}") from e
    height, width, channels = pixels.shape
    if fmt == "JPEG" and jpeg_components(data) == 3:
        return data, height, width
    rgb = _to_rgb(pixels, channels)
    encoded = tf.io.encode_jpeg(rgb, quality=quality).numpy()
    return encoded, height, width


def _to_rgb(pixels, channels: int):
    """uint8 HxWxC -> HxWx3; alpha is composited on white (as with Pillow)."""
    import numpy as np
    if channels == 1:
        return np.repeat(pixels, 3, axis=2)
    if channels == 3:
        return pixels
    if channels == 2:  # gray + alpha
        color, alpha = np.repeat(pixels[..., :1], 3, axis=2), pixels[..., 1:]
    else:
        color, alpha = pixels[..., :3], pixels[..., 3:4]
    alpha = alpha.astype(np.uint32)
    out = (color.astype(np.uint32) * alpha + 255 * (255 - alpha) + 127) // 255
    return out.astype(np.uint8)
