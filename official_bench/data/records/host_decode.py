"""One encoded image -> the uint8 crop the TensorFlow path makes
(data/preprocessing.py), without TensorFlow: decode, crop window
(crop_sampling.py), flip, bilinear resize to `image_size`.

The resize is tf.compat.v1.image.resize's bilinear (no corner alignment,
no half-pixel centres, no antialias: output pixel i samples input i *
in/out), done by OpenCV's warpAffine with that matrix; the flip is folded
into the matrix, so the crop is flipped before it is resized, as on
TensorFlow. Pixels are rounded as preprocessing.to_uint8 rounds them.

JPEGs are decoded by DECODER, chosen by measurement (docs/data.md):
simplejpeg (TensorFlow's integer-fast DCT and fancy upsampling: the same
pixels as tf.io.decode_jpeg), scaling by 1/2, 1/4 or 1/8 in the DCT where
the crop stays at least `image_size` (TensorFlow decodes at full size);
OpenCV and Pillow are the alternatives measured. Grayscale and CMYK JPEGs
come out RGB with TensorFlow's arithmetic; PNG, GIF, BMP and WebP are
decoded whole by Pillow, as decode_image does; a JPEG cut short, by none.

`nvimgcodec` (`decode: gpu`) decodes a colour JPEG's crop window alone on
a GPU through nvImageCodec, several in one call, then resizes as above
(start_crop draws the window and leaves it Pending; finish_crops decodes
a group: decode_windows, one call, then finish_crop on each; decode_crop
is both for one image); grayscale, CMYK and what it gives nothing back
for take the CPU path. `nvimgcodec_cpu`: the same code on nvImageCodec's
CPU decoder (what the tests run). TensorFlow-free.
"""

from __future__ import annotations

import importlib
import io
import os
import sys
import tempfile
from typing import (
    Any,
    Callable,
    Dict,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import numpy as np

from official_bench.data.records.crop_sampling import Window

DECODER = "simplejpeg"
# nvImageCodec's: the window alone, on the GPU or on its CPU decoder.
WINDOW_DECODERS = {"nvimgcodec": "gpu", "nvimgcodec_cpu": "cpu"}
DECODERS = ("simplejpeg", "opencv", "pillow") + tuple(WINDOW_DECODERS)
NVIMGCODEC_WHEELS = ("nvidia-nvimgcodec-cu13 and nvidia-nvjpeg "
                     '(pip install -e ".[gpu_decode]")')
# The CPU path's modules and their wheels (the jax extra): every decode
# resizes with OpenCV and decodes grayscale and CMYK JPEGs with
# simplejpeg; Pillow reads PNG, GIF, BMP and WebP.
WHEELS = {"simplejpeg": "simplejpeg", "cv2": "opencv-python-headless",
          "PIL.Image": "pillow"}
CPU_PATH = ("simplejpeg", "cv2")
# nvImageCodec's lines on import about codecs this suite never asks for,
# and about nvJPEG (import_nvimgcodec says that in its own words).
_LOAD_COMPLAINTS = ("nvjpeg", "nvJPEG", "nvtiff", "nvTIFF")
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE = frozenset([0x01, 0xD8]) | frozenset(range(0xD0, 0xD8))

WindowFn = Callable[[int, int], Window]  # (height, width) -> y, x, h, w


class UndecodableImage(ValueError):
    """The bytes could not be decoded as an image."""


class DecoderUnavailable(RuntimeError):
    """A decoder could not be loaded or started, or a module it needs
    imported (not one image's fault)."""


def _module(name: str):
    """Module `name` of the CPU path (WHEELS); raises DecoderUnavailable
    naming it and its wheel where it cannot be imported: a missing
    library is the decoder's failure, never an undecodable image."""
    try:
        return importlib.import_module(name)
    except ImportError as e:  # missing, or a library it needs (libGL)
        raise DecoderUnavailable(
            f"{name.split('.')[0]} is not importable ({type(e).__name__}: "
            f"{e}); install {WHEELS[name]} (pip install -e \".[jax]\")"
        ) from e


def check_cpu_path() -> None:
    """Imports the CPU path's modules (CPU_PATH), which every decode uses:
    a check, in the process that starts the workers, that theirs will
    import. Raises DecoderUnavailable."""
    for name in CPU_PATH:
        _module(name)


class Pending(NamedTuple):
    """A colour JPEG whose window (drawn) a window decoder is to decode
    with others (finish_crops), then resize to `size`, flipped or not."""
    data: bytes
    header: Tuple[int, int, int, bool]
    window: Window
    size: int
    flip: bool
    dct_scaling: bool


def is_jpeg(data: bytes) -> bool:
    """tf.io.is_jpeg: the JPEG start-of-image bytes."""
    return data[:3] == b"\xff\xd8\xff"


def jpeg_header(data: bytes) -> Tuple[int, int, int, bool]:
    """(height, width, components, Adobe APP14 marker seen) from the
    markers before the first scan."""
    pos, end, frame, adobe = 2, len(data), None, False
    while pos + 4 <= end:
        if data[pos] != 0xFF:
            raise UndecodableImage(f"no JPEG marker at byte {pos}")
        marker = data[pos + 1]
        if marker == 0xFF or marker in _STANDALONE:
            pos += 1 if marker == 0xFF else 2
            continue
        if marker in (0xDA, 0xD9):  # start of scan, end of image
            break
        length = data[pos + 2] << 8 | data[pos + 3]
        segment = data[pos + 4:pos + 2 + length]
        if marker == 0xEE and segment[:5] == b"Adobe":
            adobe = True
        elif marker in _SOF and frame is None and len(segment) >= 6:
            frame = (segment[1] << 8 | segment[2],
                     segment[3] << 8 | segment[4], segment[5])
        pos += 2 + length
    if frame is None or not frame[0] or not frame[1]:
        raise UndecodableImage("no JPEG frame header with a size")
    return frame[0], frame[1], frame[2], adobe


def check_whole(data: bytes) -> None:
    """UndecodableImage for a JPEG cut short: no end-of-image marker
    after its last start of scan. simplejpeg (not strict: a warning such
    as ImageNet's "extraneous bytes before marker" must not refuse an
    image TensorFlow decodes) and nvImageCodec give such a file's missing
    rows grey, where tf.io.decode_jpeg fails. Coded scan data never holds
    these two markers (a 0xFF there is followed by 0x00 or a restart
    marker); an EXIF thumbnail's end-of-image comes before the main scan,
    so it does not count. Microseconds: the marker is found at the end."""
    end = data.rfind(b"\xff\xd9")
    if end < 0 or data.find(b"\xff\xda", end + 2) >= 0:
        raise UndecodableImage(
            f"the JPEG ends without its end-of-image marker after its last "
            f"scan ({len(data)} bytes): a file cut short")


def cmyk_to_rgb(cmyk: np.ndarray, adobe: bool) -> np.ndarray:
    """TensorFlow's CMYK -> RGB (jpeg_mem.cc), on the decoder's raw CMYK:
    Adobe's inverted CMYK k * c / 255, else (255 - k) * (255 - c) / 255,
    truncated."""
    values = cmyk.astype(np.uint16)
    if not adobe:
        values = 255 - values
    rgb = values[..., :3] * values[..., 3:4] // 255
    return rgb.astype(np.uint8)


def _scale_for(height: int, width: int, need_h: int, need_w: int) -> int:
    """The largest of 1, 2, 4, 8 that keeps the decoded image at least
    need_h x need_w."""
    for scale in (8, 4, 2):
        if -(-height // scale) >= need_h and -(-width // scale) >= need_w:
            return scale
    return 1


def _simplejpeg(data, header, need, channels):
    simplejpeg = _module("simplejpeg")
    height, width, components, adobe = header
    scale = _scale_for(height, width, *need)
    size = dict(min_height=-(-height // scale), min_width=-(-width // scale),
                min_factor=scale, fastdct=True, strict=False)
    if components == 4:
        if channels == 1:
            raise UndecodableImage("a CMYK JPEG cannot be read as grayscale")
        return cmyk_to_rgb(simplejpeg.decode_jpeg(data, "CMYK", **size),
                           adobe)
    return simplejpeg.decode_jpeg(data, "RGB" if channels == 3 else "GRAY",
                                  **size)


def _cv2():
    """OpenCV, on this thread only: a loader worker is one core's work."""
    cv2 = _module("cv2")
    if cv2.getNumThreads() != 1:
        cv2.setNumThreads(1)
    return cv2


def _opencv(data, header, need, channels):
    cv2 = _cv2()
    scale = _scale_for(header[0], header[1], *need)
    flags = {(1, 3): cv2.IMREAD_COLOR, (1, 1): cv2.IMREAD_GRAYSCALE,
             (2, 3): cv2.IMREAD_REDUCED_COLOR_2,
             (2, 1): cv2.IMREAD_REDUCED_GRAYSCALE_2,
             (4, 3): cv2.IMREAD_REDUCED_COLOR_4,
             (4, 1): cv2.IMREAD_REDUCED_GRAYSCALE_4,
             (8, 3): cv2.IMREAD_REDUCED_COLOR_8,
             (8, 1): cv2.IMREAD_REDUCED_GRAYSCALE_8}[scale, channels]
    image = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    if image is None:
        raise UndecodableImage("OpenCV could not decode it")
    return image  # BGR: reversed after the resize, on fewer pixels


def _pillow_jpeg(data, header, need, channels):
    image = _module("PIL.Image").open(io.BytesIO(data))
    height, width, components, _ = header
    scale = _scale_for(height, width, *need)
    mode = "L" if channels == 1 else ("CMYK" if components == 4 else "RGB")
    image.draft(mode, (-(-width // scale), -(-height // scale)))
    if image.mode == "CMYK":
        # Pillow inverts Adobe CMYK, so TensorFlow's sum is the plain one.
        return cmyk_to_rgb(np.asarray(image), adobe=False)
    if image.mode != mode:
        image = image.convert(mode)
    return np.asarray(image)


_JPEG = {"simplejpeg": _simplejpeg, "opencv": _opencv,
         "pillow": _pillow_jpeg}


_NV: Dict[Tuple[str, int], tuple] = {}  # (kind, device): one per process
_IMPORTED: list = []  # [module, its import's lines, whether said]
_FELL_BACK = [0]  # colour JPEGs nvImageCodec gave back to the CPU path


def _import_quietly():
    """(nvImageCodec, what its import printed), imported once per process
    with file descriptors 1 and 2 caught (it prints from C++)."""
    if _IMPORTED:
        return _IMPORTED
    with tempfile.TemporaryFile() as said:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        saved = []
        try:
            saved.append(os.dup(1))
            saved.append(os.dup(2))
            os.dup2(said.fileno(), 1)
            os.dup2(said.fileno(), 2)
            from nvidia import nvimgcodec
        finally:
            for fd, old in zip((1, 2), saved):
                os.dup2(old, fd)
                os.close(old)
        said.seek(0)
        lines = said.read().decode(errors="replace").splitlines()
    _IMPORTED[:] = [nvimgcodec, lines, False]
    return _IMPORTED


def import_nvimgcodec(kind: str = "gpu"):
    """nvImageCodec; its import's lines about libraries it could not load
    are dropped (this suite uses only nvJPEG, and only on a GPU). Raises
    DecoderUnavailable naming the wheels: not importable, or for the GPU
    (`kind` gpu), no nvJPEG found."""
    try:
        nvimgcodec, lines, said = _import_quietly()
    except Exception as e:  # ImportError, a broken library, no temp file
        raise DecoderUnavailable(
            f"nvImageCodec is not importable ({type(e).__name__}: {e}); "
            f"install {NVIMGCODEC_WHEELS}") from e
    for line in [] if said else lines:
        if not any(word in line for word in _LOAD_COMPLAINTS) and \
                not line.startswith("Note: If using nvImageCodec"):
            print(line, file=sys.stderr)
    _IMPORTED[2] = True
    if kind == "gpu" and any("Failed to load nvjpeg library" in line
                             for line in lines):
        raise DecoderUnavailable("nvImageCodec found no nvJPEG library to "
                                 "decode on a GPU; install nvidia-nvjpeg "
                                 "(CUDA 13)")
    return nvimgcodec


def _nv_decoder(kind: str, device: int):
    """(module, decoder, params) for `kind` on `device`, made once."""
    if (kind, device) not in _NV:
        nv = import_nvimgcodec(kind)
        try:
            _NV[kind, device] = _start_decoder(nv, kind, device)
        except Exception as e:  # no GPU, a CUDA error
            raise DecoderUnavailable(
                f"nvImageCodec could not start on {_where(kind, device)}: "
                f"{type(e).__name__}: {e}") from e
    return _NV[kind, device]


def _where(kind: str, device: int) -> str:
    return "its CPU decoder" if kind == "cpu" else f"GPU {device}"


def check_decoder(kind: str, device: int = 0) -> None:
    """Start (and drop) nvImageCodec's `kind` decoder ("gpu" on `device`,
    "cpu"): a check, in the process that starts the workers, that theirs
    will start. Raises DecoderUnavailable."""
    _nv_decoder(kind, device)
    del _NV[kind, device]


def _start_decoder(nv, kind: str, device: int):
    kinds = nv.BackendKind
    if kind == "cpu":  # one thread: a worker is one core's work
        decoder = nv.Decoder(device_id=nv.NVIMGCODEC_DEVICE_CPU_ONLY,
                             max_num_cpu_threads=1,
                             backends=[nv.Backend(kinds.CPU_ONLY)],
                             options=":fancy_upsampling=1")
    else:  # the JPEG engines, else nvJPEG's CUDA decoder (a hybrid kind:
        # nvImageCodec 0.9 has no GPU_ONLY JPEG decoder); one CPU thread
        # keeps every call on the engines' one batched path
        decoder = nv.Decoder(
            device_id=device, max_num_cpu_threads=1,
            backends=[nv.Backend(kinds.HW_GPU_ONLY),
                      nv.Backend(kinds.HYBRID_CPU_GPU)],
            options=":fancy_upsampling=1 "
                    "nvjpeg_cuda_decoder:hybrid_huffman_threshold=0")
    params = nv.DecodeParams(apply_exif_orientation=False,
                             sample_format=nv.SampleFormat.I_RGB)
    return nv, decoder, params


def _nv_windows(pending: Sequence[Pending], kind: str, device: int,
                stream: int = 0) -> List[Optional[Any]]:
    """The windows of colour JPEGs, RGB, decoded in one call of
    nvImageCodec, as its Images (on the GPU for a GPU decoder: finish_crop
    copies each to the host, so a thread pool's threads copy them side by
    side, on `stream`, the CUDA stream the call is ordered on); None where
    it gave nothing back (the CPU path then decides, and the first time a
    worker says so). Raises DecoderUnavailable when the decoder itself
    fails (a CUDA error, memory), not an image."""
    nv, decoder, params = _nv_decoder(kind, device)
    streams, where = [], []
    for k, p in enumerate(pending):
        y, x, h, w = p.window
        try:
            streams.append(nv.CodeStream(p.data).get_sub_code_stream(
                region=nv.Region(y, x, y + h, x + w)))
            where.append(k)
        except Exception:  # noqa: BLE001 - bytes it cannot parse
            _fell_back(len(p.data), "could not parse it")
    out: List[Optional[np.ndarray]] = [None] * len(pending)
    try:
        images = decoder.decode(streams, params=params,
                                cuda_stream=stream) if streams else []
        for k, image in zip(where, images):
            out[k] = image
    except Exception as e:
        raise DecoderUnavailable(
            f"nvImageCodec failed on {_where(kind, device)}: "
            f"{type(e).__name__}: {e}") from e
    for k, p in enumerate(pending):
        if k in where and (out[k] is None or tuple(out[k].shape) !=
                           (p.window[2], p.window[3], 3)):
            out[k] = _fell_back(len(p.data),
                                "gave no image of the window back")
    return out


def _fell_back(size: int, why: str) -> None:
    _FELL_BACK[0] += 1
    if _FELL_BACK[0] == 1:
        from absl import logging
        logging.warning("official_bench: nvImageCodec %s for a JPEG of %d "
                        "bytes; the CPU decodes it, and any other it does "
                        "not take (said once per worker)", why, size)
    return None


def decode_other(data: bytes, channels: int) -> np.ndarray:
    """A PNG, GIF, BMP or WebP, decoded whole by Pillow (its first frame),
    as tf.io.decode_image: alpha dropped, 16-bit samples to their high
    byte, grayscale and palettes expanded."""
    Image = _module("PIL.Image")
    image = Image.open(io.BytesIO(data))
    if image.mode in ("I;16", "I;16B", "I;16L"):
        image = Image.fromarray((np.asarray(image) >> 8).astype(np.uint8))
    return np.asarray(image.convert("RGB" if channels == 3 else "L"))


def resize(crop: np.ndarray, size: int, flip: bool = False) -> np.ndarray:
    """tf.compat.v1.image.resize bilinear of the (flipped) crop to size x
    size, rounded to uint8."""
    cv2 = _cv2()
    height, width = crop.shape[:2]
    sx, sy = width / size, height / size
    matrix = np.array([[-sx if flip else sx, 0.0, width - 1 if flip else 0],
                       [0.0, sy, 0.0]])
    out = cv2.warpAffine(crop, matrix, (size, size),
                         flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                         borderMode=cv2.BORDER_REPLICATE)
    return out.reshape(size, size, -1)


def decode_crop(data: bytes, window_fn: WindowFn, size: int, flip: bool,
                channels: int = 3, decoder: str = DECODER,
                dct_scaling: bool = True, device: int = 0) -> np.ndarray:
    """Encoded image -> [size, size, channels] uint8: the window that
    `window_fn(height, width)` picks, flipped or not, resized. With
    `dct_scaling` a JPEG may be decoded at 1/2, 1/4 or 1/8 of its size
    when the crop stays at least `size` (else always whole); a window
    decoder decodes the window alone, on GPU `device`. Raises
    UndecodableImage, or DecoderUnavailable (a module missing)."""
    crop = start_crop(data, window_fn, size, flip, channels, decoder,
                      dct_scaling)
    if isinstance(crop, Pending):
        crop = finish_crops([crop], decoder, device)[0]
        if isinstance(crop, UndecodableImage):
            raise crop
    return crop


def start_crop(data: bytes, window_fn: WindowFn, size: int, flip: bool,
               channels: int = 3, decoder: str = DECODER,
               dct_scaling: bool = True) -> Union[np.ndarray, Pending]:
    """decode_crop up to the decode: a colour JPEG that a window decoder
    takes comes back Pending, its window drawn (for finish_crops); any
    other image comes back done, on the CPU path. Raises
    UndecodableImage, or DecoderUnavailable (a module missing)."""
    try:
        if not is_jpeg(data):
            image = decode_other(data, channels)
            return _resize_window(image, window_fn(*image.shape[:2]), size,
                                  flip)
        header = jpeg_header(data)
        check_whole(data)
        window = window_fn(header[0], header[1])
        if decoder in WINDOW_DECODERS and header[2] == 3 and channels == 3:
            return Pending(data, header, window, size, flip, dct_scaling)
        if decoder in WINDOW_DECODERS:  # grayscale or CMYK
            decoder = DECODER
        return _cpu_crop(data, header, window, size, flip, channels,
                         decoder, dct_scaling)
    except (UndecodableImage, DecoderUnavailable):
        raise
    except Exception as e:  # the decoders raise many kinds
        raise UndecodableImage(f"{type(e).__name__}: {e}") from e


def finish_crops(pending: Sequence[Pending], decoder: str, device: int = 0,
                 map_fn: Callable = map
                 ) -> List[Union[np.ndarray, UndecodableImage]]:
    """The crops of `pending`, their windows decoded by `decoder` (a
    window decoder) in one call on GPU `device`, then resized through
    `map_fn` (a thread pool's map: OpenCV releases the GIL); one it gives
    nothing back for takes the CPU path. An image that cannot be decoded
    is its UndecodableImage in the list; raises DecoderUnavailable."""
    windows = decode_windows(pending, decoder, device)
    return list(map_fn(finish_crop, pending, windows))


def decode_windows(pending: Sequence[Pending], decoder: str,
                   device: int = 0, stream: int = 0) -> List[Optional[Any]]:
    """finish_crops' first half: the windows of `pending` decoded by
    `decoder` (a window decoder) in one call on GPU `device`, ordered on
    CUDA stream `stream` (0: the default stream), for finish_crop
    (nvImageCodec's Images, still on the GPU, copied on that stream);
    None where the CPU path is to decode. Raises DecoderUnavailable."""
    return _nv_windows(pending, WINDOW_DECODERS[decoder], device, stream)


def finish_crop(p: Pending, window: Optional[Any]
                ) -> Union[np.ndarray, UndecodableImage]:
    """The crop of `p` from its decoded `window` (RGB: an array, or an
    nvImageCodec Image, copied to the host here), resized and flipped;
    None: the CPU path decodes it. An image that cannot be decoded is its
    UndecodableImage; a copy that fails or a module missing raises
    DecoderUnavailable."""
    window = _on_host(window)
    try:
        return resize(window, p.size, p.flip) if window is not None \
            else _cpu_crop(p.data, p.header, p.window, p.size, p.flip, 3,
                           DECODER, p.dct_scaling)
    except UndecodableImage as e:
        return e
    except DecoderUnavailable:
        raise
    except Exception as e:  # noqa: BLE001 - the decoders' many kinds
        return UndecodableImage(f"{type(e).__name__}: {e}")


def _on_host(window: Optional[Any]) -> Optional[np.ndarray]:
    """A decoded window as a host array: an nvImageCodec Image copied from
    the GPU (a CUDA error is the decoder's failure, not the image's)."""
    if window is None or isinstance(window, np.ndarray):
        return window
    try:
        host = window.cpu()
    except Exception as e:  # noqa: BLE001 - a CUDA error of any kind
        raise DecoderUnavailable(f"nvImageCodec could not copy a decoded "
                                 f"window to the host: {type(e).__name__}: "
                                 f"{e}") from e
    if host is None:
        raise DecoderUnavailable("nvImageCodec could not copy a decoded "
                                 "window to the host")
    return np.asarray(host)


def _cpu_crop(data: bytes, header, window: Window, size: int, flip: bool,
              channels: int, decoder: str, dct_scaling: bool) -> np.ndarray:
    """A JPEG decoded by a CPU decoder (scaled in the DCT where
    `dct_scaling` allows), its window cut, resized, flipped."""
    y, x, h, w = window
    need = (-(-header[0] * size // h), -(-header[1] * size // w)) \
        if dct_scaling else header[:2]
    image = _JPEG[decoder](data, header, need, channels)
    if image.shape[:2] != header[:2]:  # scaled in the DCT
        fy, fx = image.shape[0] / header[0], image.shape[1] / header[1]
        window = (round(y * fy), round(x * fx),
                  max(1, round(h * fy)), max(1, round(w * fx)))
    out = _resize_window(image, window, size, flip)
    if decoder == "opencv" and channels == 3:  # BGR
        out = out[..., ::-1].copy()
    return out


def _resize_window(image: np.ndarray, window: Window, size: int,
                   flip: bool) -> np.ndarray:
    if image.ndim == 2:
        image = image[..., None]
    y, x, h, w = window
    return resize(image[y:y + h, x:x + w], size, flip)
