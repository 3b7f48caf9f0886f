"""Can the GPU's JPEG decoder feed an H200? (issue 46: the GPU decode option
CPU decoding needs; BENCHMARKS.md, "Real records against synthetic data on
an H200"). nvImageCodec's decoders (the hardware JPEG engines, nvJPEG's CUDA
decoder) decode ImageNet-sized JPEGs in batches with the train crop's window as
the region of interest, against simplejpeg on one core doing what an input
worker does (the whole image, then the window): images per second, the
process's CPU seconds per image (every thread, nvImageCodec's too), images it
could not decode, and the mean absolute difference from simplejpeg's pixels of
the same window (0-255 units). Then an input worker's whole per-image work
(window, decode, resize, flip) with simplejpeg and with `decode: gpu`'s
decoder, one image a call and, as the workers decode, a group of
host_examples.WINDOW_GROUP a call.

    python benchmarks/gpu_decode_probe.py --image_dir DIR [--batch 256]
        [--seconds 8] [--decoders hw,cuda] [--json OUT.json]

DIR is searched for *.JPEG / *.jpg (scripts/make_jpeg_folder.py makes
ImageNet-like ones). `--decoders cpu` runs nvImageCodec's CPU decoder with
no GPU, which checks this script's flow. Needs the nvidia-nvimgcodec-cu13
and nvidia-nvjpeg wheels; TensorFlow-free.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import statistics
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from official_bench.data.records import (  # noqa: E402
    crop_sampling,
    host_decode,
    host_examples,
)

# nvImageCodec 0.9 registers nvJPEG's CUDA decoder as HYBRID_CPU_GPU.
KINDS = {"hw": "HW_GPU_ONLY", "cuda": "HYBRID_CPU_GPU", "cpu": "CPU_ONLY"}
CHECKED = 16  # images per decoder compared with simplejpeg


def load(image_dir: str, limit: int, seed: int):
    """[(bytes, window)] of up to `limit` JPEGs, each with a train window."""
    paths = sorted(p for p in glob.glob(os.path.join(image_dir, "**", "*"),
                                        recursive=True)
                   if p.lower().endswith((".jpeg", ".jpg")))[:limit]
    if not paths:
        raise SystemExit(f"gpu_decode_probe: no *.JPEG or *.jpg under "
                         f"{image_dir}")
    rng = random.Random(seed)
    out = []
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        height, width = host_decode.jpeg_header(data)[:2]
        out.append((data, crop_sampling.train_window(height, width, [], rng)))
    return out


def simplejpeg_crop(data: bytes, window) -> np.ndarray:
    """What a worker decodes: the whole image (TensorFlow's integer-fast
    DCT), then the window."""
    import simplejpeg
    y, x, h, w = window
    return simplejpeg.decode_jpeg(data, "RGB", fastdct=True,
                                  strict=False)[y:y + h, x:x + w]


def cpu_rate(images, seconds: float) -> dict:
    """simplejpeg on this thread: images per CPU-second."""
    count, cpu0 = 0, time.process_time()
    while time.process_time() - cpu0 < seconds:
        data, window = images[count % len(images)]
        simplejpeg_crop(data, window)
        count += 1
    cpu = time.process_time() - cpu0
    return {"decoder": "simplejpeg, 1 thread", "img_s": count / cpu,
            "cpu_ms_per_image": 1e3 * cpu / count, "failed": 0,
            "mad": None, "images": count}


def _syncer():
    """wait(decoded): waits for the GPU's work on a decoded batch, with
    cupy's device synchronise where it is there, else by copying the
    batch's last decoded image to the host. Chosen once, outside the
    timed loop."""
    try:
        import cupy
        sync = cupy.cuda.runtime.deviceSynchronize
        return lambda decoded: sync()
    except Exception:  # no cupy, or no GPU for it
        def copy_last(decoded):
            done = [image for image in decoded if image is not None]
            if done:
                done[-1].cpu()
        return copy_last


def nv_rate(nv, name: str, images, batch: int, seconds: float) -> dict:
    """One nvImageCodec decoder: batches of `batch` windows, timed."""
    kind = getattr(nv.BackendKind, KINDS[name])
    device = nv.NVIMGCODEC_DEVICE_CPU_ONLY if name == "cpu" else -1
    decoder = nv.Decoder(device_id=device, backends=[nv.Backend(kind)],
                         options=":fancy_upsampling=1 nvjpeg_cuda_decoder:"
                                 "hybrid_huffman_threshold=0")
    params = nv.DecodeParams(apply_exif_orientation=False)

    def streams(start: int):
        out = []
        for k in range(batch):
            data, (y, x, h, w) = images[(start + k) % len(images)]
            out.append(nv.CodeStream(data).get_sub_code_stream(
                region=nv.Region(y, x, y + h, x + w)))
        return out

    first = decoder.decode(streams(0), params=params)
    mads = []
    for k, image in enumerate(first[:CHECKED]):
        if image is None:
            continue
        got = np.asarray(image.cpu())
        want = simplejpeg_crop(*images[k])
        if got.shape != want.shape:
            raise SystemExit(f"gpu_decode_probe: {name}: image {k} came out "
                             f"{got.shape}, its window is {want.shape}")
        mads.append(float(np.abs(got.astype(np.int16) - want).mean()))
    count = failed = 0
    start = batch
    wait = _syncer()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        decoded = decoder.decode(streams(start), params=params)
        failed += sum(image is None for image in decoded)
        wait(decoded)
        count += batch
        start += batch
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    return {"decoder": f"nvImageCodec {name} ({KINDS[name]})",
            "img_s": count / wall, "cpu_ms_per_image": 1e3 * cpu / count,
            "failed": failed, "images": count,
            "mad": statistics.mean(mads) if mads else None}


def worker_rate(decoder: str, images, seconds: float, group: int = 1
                ) -> dict:
    """An input worker's whole per-image work (host_decode.start_crop
    and finish_crops: the window decoded, resized to 224, flipped) with
    `decoder`, a window decoder taking `group` windows a call: per wall
    and per CPU second."""
    count = failed = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        crops = []
        for k in range(count, count + group):
            data, window = images[k % len(images)]
            crops.append(host_decode.start_crop(
                data, lambda h, w, window=window: window, 224, k % 2 == 0,
                decoder=decoder, dct_scaling=False))
        pending = [c for c in crops if isinstance(c, host_decode.Pending)]
        if pending:
            done = host_decode.finish_crops(pending, decoder)
            failed += sum(isinstance(c, Exception) for c in done)
        count += group
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    return {"decoder": f"worker path, {decoder}, {group} a call",
            "img_s": count / wall, "cpu_ms_per_image": 1e3 * cpu / count,
            "failed": failed, "mad": None, "images": count}


def report(rows, args) -> None:
    print("| decoder | img/s | CPU ms per image | failed | mean abs diff "
          "vs simplejpeg (0-255) |\n|---|---|---|---|---|")
    for r in rows:
        mad = "-" if r.get("mad") is None else f"{r['mad']:.2f}"
        print(f"| {r['decoder']} | {r['img_s']:,.0f} | "
              f"{r['cpu_ms_per_image']:.3f} | {r['failed']} of "
              f"{r['images']} | {mad} |")
    print(f"(batch {args.batch}, {args.seconds:g} s each, train windows as "
          f"the region of interest; {os.cpu_count()} CPUs)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--image_dir", required=True,
                   help="a folder of JPEGs (searched recursively)")
    p.add_argument("--images", type=int, default=2000,
                   help="JPEGs read from it (default 2000)")
    p.add_argument("--batch", type=int, default=256,
                   help="images per decode call (default 256)")
    p.add_argument("--seconds", type=float, default=8.0,
                   help="seconds each decoder is timed (default 8)")
    p.add_argument("--decoders", default="hw,cuda",
                   help="comma-separated, of " + ", ".join(KINDS) +
                        " (default hw,cuda)")
    p.add_argument("--worker_decoders", default="simplejpeg,nvimgcodec",
                   help="host_decode decoders timed on the input worker's "
                        "whole per-image work; a window decoder one image "
                        "a call and a group of host_examples.WINDOW_GROUP "
                        "(default simplejpeg,nvimgcodec; '' for none)")
    p.add_argument("--json", help="also write the rows here")
    args = p.parse_args(argv)
    names = args.decoders.split(",")
    unknown = [n for n in names if n not in KINDS]
    if unknown:
        p.error(f"unknown decoder {unknown[0]!r}; valid: {', '.join(KINDS)}")
    try:
        from nvidia import nvimgcodec as nv
    except ImportError as e:
        p.error(f"nvImageCodec is not importable ({e}): install the "
                "nvidia-nvimgcodec-cu13 and nvidia-nvjpeg wheels")
    images = load(args.image_dir, args.images, seed=0)
    print(f"{len(images)} JPEGs, mean "
          f"{statistics.mean(len(d) for d, _ in images) / 1024:.0f} KiB",
          flush=True)
    rows = [cpu_rate(images, min(args.seconds, 4.0))]
    for name in names:
        try:
            rows.append(nv_rate(nv, name, images, args.batch, args.seconds))
        except Exception as e:  # a backend this card or build lacks
            print(f"{name}: failed: {type(e).__name__}: {e}", flush=True)
            rows.append({"decoder": f"nvImageCodec {name}", "img_s": 0.0,
                         "cpu_ms_per_image": 0.0, "failed": "all",
                         "images": 0, "mad": None,
                         "error": f"{type(e).__name__}: {e}"})
        print(f"{rows[-1]['decoder']}: {rows[-1]['img_s']:,.0f} img/s",
              flush=True)
    for decoder in filter(None, args.worker_decoders.split(",")):
        groups = [1, host_examples.WINDOW_GROUP] \
            if decoder in host_decode.WINDOW_DECODERS else [1]
        for group in groups:
            try:
                rows.append(worker_rate(decoder, images,
                                        min(args.seconds, 4.0), group))
            except Exception as e:  # DecoderUnavailable: no GPU here
                print(f"worker path, {decoder}, {group} a call: failed: {e}",
                      flush=True)
    report(rows, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"batch": args.batch, "seconds": args.seconds,
                       "cpus": os.cpu_count(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
