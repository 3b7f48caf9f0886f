"""The TensorFlow-free decode (data/records/host_decode.py) makes the
TensorFlow path's images (data/preprocessing.py): the eval centre crop
within EVAL_MAD of preprocess_for_eval (mean absolute difference, 0..255;
support/natural_images.py says why each decoder's bound is what it is),
a train window and flip the same, grayscale, CMYK and PNG/GIF/BMP
images in RGB with TensorFlow's arithmetic, and undecodable bytes refused.
"""

import io
import os
import random
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from official_bench.data import preprocessing
from official_bench.data.records import crop_sampling, host_decode
from official_bench.runtime.keras_setup import tf
from support.natural_images import EVAL_MAD, natural_jpeg, natural_pixels
from support.nv_images import OnTheGpu


def tf_eval(data, size=224, channels=3, padding=32):
    return preprocessing.preprocess_for_eval(
        data, size, channels, crop_padding=padding,
        transfer_uint8=True).numpy()


def our_eval(data, size=224, channels=3, padding=32,
             decoder=host_decode.DECODER):
    return host_decode.decode_crop(
        data, lambda h, w: crop_sampling.center_window(h, w, size, padding),
        size, False, channels, decoder, dct_scaling=False)


def mad(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype == np.uint8
    return float(np.abs(a.astype(int) - b.astype(int)).mean())


def test_the_resize_is_tensorflows_legacy_bilinear():
    rng = np.random.default_rng(0)
    for h, w in ((300, 400), (97, 130), (224, 224), (60, 250), (500, 90)):
        image = rng.integers(0, 256, (h, w, 3)).astype(np.uint8)
        for flip in (False, True):
            source = image[:, ::-1] if flip else image
            expected = preprocessing.to_uint8(preprocessing.resize(
                source, 224)).numpy()
            got = host_decode.resize(image, 224, flip)
            diff = np.abs(got.astype(int) - expected.astype(int))
            assert diff.max() <= 1 and diff.mean() < 0.01, (h, w, flip)


CPU_DECODERS = [d for d in host_decode.DECODERS
                if host_decode.WINDOW_DECODERS.get(d) != "gpu"]
HAS_GPU = os.path.exists("/dev/nvidia0")


@pytest.mark.parametrize("decoder", CPU_DECODERS)
def test_eval_images_are_tensorflows_within_the_bound(decoder):
    for seed, (w, h) in enumerate([(500, 375), (375, 500), (640, 480),
                                   (1200, 900), (200, 150)]):
        data = natural_jpeg(seed, w, h)
        assert mad(our_eval(data, decoder=decoder), tf_eval(data)) < \
            EVAL_MAD[decoder], (w, h)


def test_the_bound_is_tight_enough_to_see_a_wrong_crop():
    data = natural_jpeg(1, 500, 375)
    wrong = host_decode.decode_crop(
        data, lambda h, w: crop_sampling.center_window(h, w, 224, 0), 224,
        False)
    assert mad(wrong, tf_eval(data)) > 5 * EVAL_MAD["opencv"]


def test_a_train_window_and_flip_are_tensorflows():
    rng = np.random.default_rng(3)
    data = natural_jpeg(7, 500, 375)
    for flip in (False, True):
        for _ in range(4):
            ch, cw = (int(v) for v in rng.integers(40, 375, 2))
            y, x = int(rng.integers(0, 375 - ch)), int(rng.integers(0,
                                                                    500 - cw))
            image = tf.image.decode_and_crop_jpeg(data, [y, x, ch, cw],
                                                  channels=3)
            if flip:
                image = tf.image.flip_left_right(image)
            expected = preprocessing.to_uint8(preprocessing.resize(
                image, 224)).numpy()
            got = host_decode.decode_crop(data, lambda h, w: (y, x, ch, cw),
                                          224, flip)
            assert mad(got, expected) < EVAL_MAD["simplejpeg"], (flip, ch, cw)


def strip_adobe(data):
    """The JPEG without its APP14 "Adobe" segment."""
    at = data.index(b"\xff\xee")
    length = data[at + 2] << 8 | data[at + 3]
    assert data[at + 4:at + 9] == b"Adobe"
    return data[:at] + data[at + 2 + length:]


def encoded(pixels, fmt, mode=None, **kw):
    from PIL import Image
    image = Image.fromarray(pixels)
    if mode:
        image = image.convert(mode)
    buf = io.BytesIO()
    image.save(buf, fmt, **kw)
    return buf.getvalue()


def other_images():
    from PIL import Image
    pixels = natural_pixels(5, 160, 120)
    rgba = np.dstack([pixels, np.arange(160 * 120).reshape(120, 160) % 256
                      ]).astype(np.uint8)
    deep = (natural_pixels(6, 160, 120)[..., 0].astype(np.uint16) * 257 + 99)
    buf = io.BytesIO()
    Image.fromarray(deep).save(buf, "PNG")
    return {
        "grayscale jpeg": natural_jpeg(1, 300, 200, mode="L"),
        "cmyk jpeg (adobe)": natural_jpeg(2, 300, 200, mode="CMYK"),
        "cmyk jpeg (no adobe)": strip_adobe(natural_jpeg(2, 300, 200,
                                                         mode="CMYK")),
        "progressive jpeg": encoded(pixels, "JPEG", progressive=True),
        "png rgb": encoded(pixels, "PNG"),
        "png rgba": encoded(rgba, "PNG"),
        "png gray": encoded(pixels, "PNG", "L"),
        "png gray+alpha": encoded(rgba, "PNG", "LA"),
        "png palette": encoded(pixels, "PNG", "P"),
        "png 16-bit": buf.getvalue(),
        "gif": encoded(pixels, "GIF"),
        "bmp": encoded(pixels, "BMP"),
    }


@pytest.mark.parametrize("name", sorted(other_images()))
def test_grayscale_cmyk_and_non_jpegs_come_out_rgb_as_on_tensorflow(name):
    data = other_images()[name]
    ours = our_eval(data, size=64)
    assert ours.shape == (64, 64, 3)
    assert mad(ours, tf_eval(data, size=64)) < EVAL_MAD["simplejpeg"]
    if "gray" in name:
        assert (ours[..., 0] == ours[..., 2]).all()


def test_one_channel_output_is_tensorflows():
    data = natural_jpeg(4, 300, 200)
    ours = our_eval(data, size=64, channels=1)
    assert ours.shape == (64, 64, 1)
    assert mad(ours, tf_eval(data, size=64, channels=1)) < 0.05
    with pytest.raises(host_decode.UndecodableImage):  # TF fails too
        our_eval(natural_jpeg(2, 300, 200, mode="CMYK"), channels=1)


def test_jpeg_header_is_tensorflows_shape():
    for data in (natural_jpeg(0, 321, 123), natural_jpeg(1, 50, 70, mode="L"),
                 other_images()["progressive jpeg"],
                 natural_jpeg(2, 300, 200, mode="CMYK")):
        h, w, c, _ = host_decode.jpeg_header(data)
        assert [h, w] == tf.image.extract_jpeg_shape(data).numpy()[:2].tolist()
    assert host_decode.jpeg_header(natural_jpeg(2, 30, 20, mode="CMYK"))[2:] \
        == (4, True)


@pytest.mark.parametrize("data", [
    b"", b"\xff\xd8\xff", b"\xff\xd8\xffgarbage" * 10, b"\x00" * 100,
    natural_jpeg(0, 64, 48)[:300]])
def test_undecodable_bytes_are_refused(data):
    for decoder in ("simplejpeg", "nvimgcodec_cpu"):
        with pytest.raises(host_decode.UndecodableImage):
            host_decode.decode_crop(data, lambda h, w: (0, 0, h, w), 16,
                                    False, decoder=decoder)


def cut_in_scan(data, fraction):
    """`data` cut at `fraction` of its coded scan data (after the last
    start-of-scan's header), where decoders that do not check the end
    give the missing rows grey."""
    scan = data.rindex(b"\xff\xda")
    return data[:scan + 12 + int((len(data) - scan - 12) * fraction)]


def with_thumbnail(data):
    """`data` with a whole small JPEG inside an APP1 segment before its
    frame, as an EXIF thumbnail sits: its end-of-image comes first."""
    thumb = natural_jpeg(3, 32, 24)
    payload = b"Exif\x00\x00" + thumb
    app1 = b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload
    return data[:2] + app1 + data[2:]


CPU_DECODERS = [d for d in host_decode.DECODERS if d != "nvimgcodec"]


@pytest.mark.parametrize("decoder", CPU_DECODERS)
@pytest.mark.parametrize("make", [
    lambda: natural_jpeg(7, 500, 375),
    lambda: other_images()["progressive jpeg"],
    lambda: with_thumbnail(natural_jpeg(7, 500, 375))],
    ids=["baseline", "progressive", "thumbnail"])
def test_a_jpeg_cut_in_its_scan_is_refused_as_on_tensorflow(decoder, make):
    """A file cut inside its coded data (a partial copy): simplejpeg and
    nvImageCodec decoded it, the missing rows grey, where TensorFlow's
    decode fails; refused by every decoder now, whatever the window
    (TensorFlow's decode_and_crop fails only where the crop reaches the
    missing rows). The same file whole, or with bytes after its end
    (which TensorFlow reads), still decodes."""
    data = make()
    for fraction in (0.3, 0.95):
        cut = cut_in_scan(data, fraction)
        with pytest.raises(host_decode.UndecodableImage,
                           match="cut short"):
            our_eval(cut, size=32, decoder=decoder)
        with pytest.raises(tf.errors.InvalidArgumentError):
            tf.io.decode_jpeg(cut)
    for whole in (data, data + b"\x00" * 64 + b"trailing"):
        assert mad(our_eval(whole, size=32, decoder=decoder),
                   tf_eval(whole, size=32)) < EVAL_MAD["simplejpeg"] + 1


def test_dct_scaling_only_where_the_crop_stays_large_enough(monkeypatch):
    import simplejpeg
    shapes = []
    real = simplejpeg.decode_jpeg

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        shapes.append(out.shape[:2])
        return out
    monkeypatch.setattr(simplejpeg, "decode_jpeg", spy)
    data = natural_jpeg(9, 1600, 1200)
    host_decode.decode_crop(data, lambda h, w: (0, 0, h, w), 224, False)
    host_decode.decode_crop(data, lambda h, w: (100, 100, 600, 700), 224,
                            False)
    host_decode.decode_crop(data, lambda h, w: (0, 0, 300, 300), 224, False)
    host_decode.decode_crop(data, lambda h, w: (0, 0, h, w), 224, False,
                            dct_scaling=False)
    assert shapes == [(300, 400), (600, 800), (1200, 1600), (1200, 1600)]


def test_a_scaled_decode_still_crops_the_same_region():
    data = natural_jpeg(8, 1600, 1200)
    window = (200, 300, 800, 1000)
    scaled = host_decode.decode_crop(data, lambda h, w: window, 224, True)
    whole = host_decode.decode_crop(data, lambda h, w: window, 224, True,
                                    dct_scaling=False)
    other = host_decode.decode_crop(data, lambda h, w: (0, 0, 800, 1000),
                                    224, True, dct_scaling=False)
    assert mad(scaled, whole) < mad(scaled, other) / 2


def test_train_crops_are_random_and_seeded():
    data = natural_jpeg(3, 500, 375)

    def one(rng):
        return host_decode.decode_crop(
            data, lambda h, w: crop_sampling.train_window(h, w, [], rng),
            64, rng.random() < 0.5)
    a = [one(random.Random(5)) for _ in range(2)]
    rng = random.Random(5)
    b = [one(rng) for _ in range(2)]
    assert (a[0] == a[1]).all() and (a[0] == b[0]).all()
    assert not (b[0] == b[1]).all()


# decode: gpu's path. nvImageCodec's CPU decoder runs the same code as its
# GPU one (host_decode.WINDOW_DECODERS) with no GPU: libjpeg-turbo's
# accurate DCT, so a window it decodes is exactly simplejpeg's accurate
# decode of the whole image, cut to the window.

def accurate_window(data, window):
    import simplejpeg
    y, x, h, w = window
    return simplejpeg.decode_jpeg(data, "RGB")[y:y + h, x:x + w]


@pytest.mark.parametrize("flip", [False, True])
def test_a_window_decoder_decodes_that_window(flip):
    data = natural_jpeg(7, 500, 375)
    for window in ((0, 0, 375, 500), (40, 90, 200, 333), (101, 7, 57, 61)):
        got = host_decode.decode_crop(data, lambda h, w: window, 224, flip,
                                      decoder="nvimgcodec_cpu")
        want = host_decode.resize(accurate_window(data, window), 224, flip)
        assert (got == want).all(), window


@pytest.fixture
def decoded_windows(monkeypatch):
    """How many windows nvImageCodec gave back (not left to the CPU)."""
    count, real = [0], host_decode._nv_windows

    def spy(*args):
        out = real(*args)
        count[0] += sum(window is not None for window in out)
        return out
    monkeypatch.setattr(host_decode, "_nv_windows", spy)
    return count


def test_grayscale_cmyk_and_non_jpegs_take_the_cpu_path(decoded_windows):
    for name, data in other_images().items():
        before = decoded_windows[0]
        ours = our_eval(data, size=64, decoder="nvimgcodec_cpu")
        cpu = our_eval(data, size=64)
        if "progressive" in name:  # colour: nvImageCodec decodes it
            assert decoded_windows[0] == before + 1
            assert mad(ours, tf_eval(data, size=64)) < \
                EVAL_MAD["nvimgcodec_cpu"]
        else:
            assert decoded_windows[0] == before, name
            assert (ours == cpu).all(), name


def test_an_image_it_gives_nothing_back_for_takes_the_cpu_path(
        monkeypatch, caplog):
    data = natural_jpeg(3, 300, 200)
    nv, decoder, params = host_decode._nv_decoder("cpu", 0)

    class Nothing:
        def decode(self, streams, **kwargs):
            return [None] * len(streams)
    monkeypatch.setitem(host_decode._NV, ("cpu", 0), (nv, Nothing(), params))
    monkeypatch.setattr(host_decode, "_FELL_BACK", [0])
    for _ in range(2):
        ours = our_eval(data, decoder="nvimgcodec_cpu")
        assert (ours == our_eval(data)).all()
    said = [r.getMessage() for r in caplog.records
            if "nvImageCodec" in r.getMessage()]
    assert said == [f"official_bench: nvImageCodec gave no image of the "
                    f"window back for a JPEG of {len(data)} bytes; the CPU "
                    f"decodes it, and any other it does not take (said once "
                    f"per worker)"]


def test_a_group_is_decoded_in_one_call_as_each_image_alone(monkeypatch):
    images = [natural_jpeg(k, 300 + 40 * k, 200) for k in range(4)]
    gray = natural_jpeg(1, 300, 200, mode="L")
    windows = [(10 * k, 20, 150, 180 + 10 * k) for k in range(4)]
    alone = [host_decode.decode_crop(data, lambda h, w, win=win: win, 64,
                                     k % 2 == 0, decoder="nvimgcodec_cpu")
             for k, (data, win) in enumerate(zip(images, windows))]
    nv, decoder, params = host_decode._nv_decoder("cpu", 0)
    calls = []

    class Counting:
        def decode(self, streams, **kwargs):
            calls.append(len(streams))
            return decoder.decode(streams, **kwargs)
    monkeypatch.setitem(host_decode._NV, ("cpu", 0), (nv, Counting(),
                                                       params))
    drawn = []

    def window_fn(k):
        def draw(height, width):
            drawn.append(k)
            return windows[k] if k < 4 else (0, 0, height, width)
        return draw
    started = [host_decode.start_crop(data, window_fn(k), 64, k % 2 == 0,
                                      decoder="nvimgcodec_cpu")
               for k, data in enumerate(images + [gray])]
    assert drawn == [0, 1, 2, 3, 4]  # each window drawn at its start
    assert [type(c).__name__ for c in started] == ["Pending"] * 4 + [
        "ndarray"]  # grayscale: the CPU path, done at once
    group = host_decode.finish_crops(started[:4], "nvimgcodec_cpu")
    assert calls == [4]
    for got, want in zip(group, alone):
        assert (got == want).all()
    # an image the CPU path cannot decode either: its error in the list
    broken = started[1]._replace(data=started[1].data[:600])
    monkeypatch.setitem(host_decode._NV, ("cpu", 0), (nv, decoder, params))
    out = host_decode.finish_crops([started[0], broken], "nvimgcodec_cpu")
    assert (out[0] == alone[0]).all()
    assert isinstance(out[1], host_decode.UndecodableImage)


def test_a_window_is_copied_to_the_host_by_the_thread_finishing_it(
        monkeypatch):
    data, window = natural_jpeg(5, 300, 200), (10, 20, 150, 180)
    nv, decoder, params = host_decode._nv_decoder("cpu", 0)
    made = []

    class Gpu:
        def decode(self, streams, **kwargs):
            made.extend(OnTheGpu(np.asarray(image))
                        for image in decoder.decode(streams, **kwargs))
            return made
    monkeypatch.setitem(host_decode._NV, ("cpu", 0), (nv, Gpu(), params))
    pending = host_decode.start_crop(data, lambda h, w: window, 64, True,
                                     decoder="nvimgcodec_cpu")
    windows = host_decode.decode_windows([pending], "nvimgcodec_cpu")
    assert windows == made and made[0].copied_on == []  # not by the call
    with ThreadPoolExecutor(1) as pool:
        got = pool.submit(host_decode.finish_crop, pending,
                          windows[0]).result()
    assert made[0].copied_on and \
        made[0].copied_on[0] != threading.get_ident()
    want = host_decode.resize(accurate_window(data, window), 64, True)
    assert (got == want).all()
    # a copy that fails is the decoder's failure, not a bad image
    lost = OnTheGpu(made[0].pixels, RuntimeError("CUDA error: lost"))
    with pytest.raises(host_decode.DecoderUnavailable,
                       match="^nvImageCodec could not copy a decoded window "
                             "to the host: RuntimeError: CUDA error: lost$"):
        host_decode.finish_crop(pending, lost)


def test_a_failing_decoder_is_not_a_bad_image_nor_a_fallback(monkeypatch):
    nv, decoder, params = host_decode._nv_decoder("cpu", 0)

    class Failing:
        def decode(self, *args, **kwargs):
            raise RuntimeError("CUDA error: out of memory")
    monkeypatch.setitem(host_decode._NV, ("cpu", 0), (nv, Failing(), params))
    with pytest.raises(host_decode.DecoderUnavailable,
                       match="nvImageCodec failed on its CPU decoder: "
                             "RuntimeError: CUDA error: out of memory"):
        our_eval(natural_jpeg(0, 64, 48), decoder="nvimgcodec_cpu")


@pytest.mark.parametrize("failure", [None, OSError("libnvimgcodec.so.0: "
                                                   "cannot open")])
def test_no_nvimgcodec_is_one_error_naming_the_wheels(monkeypatch, failure):
    monkeypatch.setattr(host_decode, "_NV", {})
    monkeypatch.setattr(host_decode, "_IMPORTED", [])
    if failure is None:
        monkeypatch.setitem(sys.modules, "nvidia", None)
    else:
        def broken():
            raise failure
        monkeypatch.setattr(host_decode, "_import_quietly", broken)
    with pytest.raises(host_decode.DecoderUnavailable) as e:
        our_eval(natural_jpeg(0, 64, 48), decoder="nvimgcodec_cpu")
    assert str(e.value).endswith(
        '; install nvidia-nvimgcodec-cu13 and nvidia-nvjpeg '
        '(pip install -e ".[gpu_decode]")'), e.value


@pytest.mark.parametrize("module,wheel", [
    ("simplejpeg", "simplejpeg"), ("cv2", "opencv-python-headless")])
def test_a_missing_cpu_library_is_the_decoders_failure(monkeypatch, module,
                                                        wheel):
    """Not importable: DecoderUnavailable naming it and its wheel, from
    the check and from a decode (was UndecodableImage: 'cannot be decoded
    as an image')."""
    monkeypatch.setitem(sys.modules, module, None)  # import raises
    line = (f"{module} is not importable (ModuleNotFoundError: import of "
            f"{module} halted; None in sys.modules); install {wheel} "
            '(pip install -e ".[jax]")')
    for call in (host_decode.check_cpu_path,
                 lambda: our_eval(natural_jpeg(0, 64, 48))):
        with pytest.raises(host_decode.DecoderUnavailable) as e:
            call()
        assert str(e.value) == line


def test_no_nvjpeg_is_refused_for_the_gpu_only(monkeypatch):
    nv = host_decode.import_nvimgcodec("cpu")
    monkeypatch.setattr(host_decode, "_IMPORTED", [nv, [
        "Failed to load nvjpeg library! Please install CUDA toolkit"], True])
    assert host_decode.import_nvimgcodec("cpu") is nv
    with pytest.raises(host_decode.DecoderUnavailable,
                       match="found no nvJPEG library to decode on a GPU; "
                             "install nvidia-nvjpeg"):
        host_decode.import_nvimgcodec("gpu")


def test_importing_it_leaves_no_descriptor_open(monkeypatch):
    monkeypatch.setattr(host_decode, "_IMPORTED", [])
    before = sorted(os.listdir("/proc/self/fd"))
    for _ in range(3):
        host_decode.import_nvimgcodec("cpu")
        monkeypatch.setattr(host_decode, "_IMPORTED", [])
    assert sorted(os.listdir("/proc/self/fd")) == before


@pytest.mark.skipif(HAS_GPU, reason="a GPU is here: the GPU test runs")
def test_the_gpu_decoder_without_a_gpu_is_not_a_bad_image():
    # here: nvJPEG is not installed (CPU machine) or no CUDA device
    with pytest.raises(host_decode.DecoderUnavailable,
                       match="nvImageCodec (found no nvJPEG|could not start "
                             "on GPU 0)"):
        our_eval(natural_jpeg(0, 64, 48), decoder="nvimgcodec")


@pytest.mark.skipif(not HAS_GPU, reason="no GPU here; the CPU decoder's "
                    "tests run the same code")
def test_the_gpu_decoder_makes_tensorflows_images_within_the_bound(
        decoded_windows):
    for seed, (w, h) in enumerate([(500, 375), (375, 500), (640, 480)]):
        data = natural_jpeg(seed, w, h)
        assert mad(our_eval(data, decoder="nvimgcodec"), tf_eval(data)) < \
            EVAL_MAD["nvimgcodec"], (w, h)
    assert decoded_windows[0] == 3  # the GPU decoded them, not the CPU


def test_its_import_lines_about_unused_codecs_are_dropped():
    code = ("from official_bench.data.records import host_decode as h; "
            "h.import_nvimgcodec('cpu'); print('imported')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "imported", p.stderr
    assert "Failed to load" not in p.stderr and "[ERROR]" not in \
        p.stderr, p.stderr


def test_the_decoder_call_is_ordered_on_the_stream_it_is_given(monkeypatch):
    # nvImageCodec orders the call and each window's copy on cuda_stream
    # (gpu_trainer gives each batch in flight a stream of its own)
    nv, decoder, params = host_decode._nv_decoder("cpu", 0)
    given = []

    class Recording:
        def decode(self, streams, **kwargs):
            given.append(kwargs.pop("cuda_stream"))
            return decoder.decode(streams, **kwargs)
    monkeypatch.setitem(host_decode._NV, ("cpu", 0),
                        (nv, Recording(), params))
    pending = host_decode.start_crop(natural_jpeg(6, 120, 90),
                                     lambda h, w: (0, 0, h, w), 32, False,
                                     decoder="nvimgcodec_cpu")
    assert host_decode.decode_windows([pending], "nvimgcodec_cpu", 0,
                                      77)[0] is not None
    host_decode.decode_windows([pending], "nvimgcodec_cpu")
    assert given == [77, 0]
