"""How far a ResNet-50 step's BN/elementwise time is from the memory
bound: an estimate from the model's shapes and the card's bandwidth, not
a measurement.

The batch norms' inputs (every convolution's output) are counted from the
suite's own model; one pass over all of them costs elements x bytes /
bandwidth. A training step touches them at least `--passes` times when
BN, ReLU and the residual add are fused as far as a kernel can fuse them
(the default, 8.5):
  forward   1  batch statistics, one read (one_pass; Keras' two_pass: 2)
            2  normalise + ReLU (+ the residual add): read x, write y
            0.5  the residual adds' second input (their outputs are half
               the batch norms' inputs)
  backward  2  the gamma/beta reductions read dy and x (the ReLU mask
               recomputed from x)
            3  dx: read dy and x, write dx
Against that bound the script sets the BN/elementwise time a profile
measured (`--measured_ms`, BENCHMARKS.md: 21.152 ms fp16 on an H200):
what a faster BN can win at most, and what one read less (one_pass,
bn_pallas) is worth.

    python benchmarks/bn_traffic.py                        # H200, fp16
    python benchmarks/bn_traffic.py --bandwidth 3.35 --measured_ms 0
"""

from __future__ import annotations

import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

H200_TB_S = 4.8  # HBM3e, NVIDIA's H200 datasheet
H200_FP16_BN_MS = 21.152  # BENCHMARKS.md, the H200 profile (fp16, b256)
H200_FP16_STEP_MS = 37.6  # the same profile's step


def bn_input_elements(model, keras) -> list:
    """(layer name, elements per image) of every batch norm's input."""
    out = []
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            count = 1
            for dim in layer.input.shape[1:]:
                count *= int(dim)
            out.append((layer.name, count))
    return out


def build_resnet50(image_size: int):
    from official_bench import config as C
    from official_bench.models import factory
    from official_bench.runtime.keras_setup import keras
    cfg = C.load_config(params_override=(
        f"runtime.num_gpus=0,train_dataset.image_size={image_size},"
        "model.model_params.data_format=channels_last"))
    return factory.build_model(cfg, 0, keras=keras), keras


def report(per_image: int, layers: int, args) -> str:
    elements = per_image * args.batch
    gb = elements * args.bytes / 1e9
    pass_ms = gb / args.bandwidth  # GB / (TB/s) = ms
    bound = args.passes * pass_ms
    lines = [
        f"ResNet-50 v1.5 at {args.image_size}x{args.image_size}, batch "
        f"{args.batch}, {args.bytes}-byte activations:",
        f"  {layers} batch norms, {per_image:,} input elements an image; "
        f"{elements / 1e9:.3f} G elements, {gb:.2f} GB a pass",
        f"  one pass at {args.bandwidth:.2f} TB/s: {pass_ms:.3f} ms; "
        f"{args.passes:g} passes (the fused minimum): {bound:.2f} ms",
        f"  one read less (one_pass or bn_pallas against two unfused "
        f"reductions): at most {pass_ms:.2f} ms"]
    if args.measured_ms:
        lines += [
            f"  measured BN/elementwise {args.measured_ms:.2f} ms: "
            f"{bound / args.measured_ms:.2f} of the bound's speed; at the "
            f"bound the step would be {args.measured_ms - bound:.1f} ms "
            f"shorter"]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=256,
                   help="images a step, on the one card (default 256)")
    p.add_argument("--image_size", type=int, default=224,
                   help="input height and width in pixels the model is "
                        "built for (default 224)")
    p.add_argument("--bytes", type=int, default=2,
                   help="bytes an activation element (fp16/bf16: 2, the "
                        "default)")
    p.add_argument("--bandwidth", type=float, default=H200_TB_S,
                   help="the card's memory bandwidth, TB/s (H200 4.8, the "
                        "default; H100 SXM 3.35)")
    p.add_argument("--passes", type=float, default=8.5,
                   help="passes over the BN inputs a step needs (module "
                        "doc; default 8.5)")
    p.add_argument("--measured_ms", type=float, default=H200_FP16_BN_MS,
                   help="a profile's BN/elementwise ms a step (0: none; "
                        f"default {H200_FP16_BN_MS}, H200 fp16)")
    args = p.parse_args(argv)
    model, keras = build_resnet50(args.image_size)
    layers = bn_input_elements(model, keras)
    print(report(sum(n for _, n in layers), len(layers), args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
