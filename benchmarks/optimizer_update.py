"""Cost of one optimizer update of ResNet-50's weights: fused vs new Keras.

Issue 9 section 5's suspect, measured alone: `apply_gradients` of fixed
gradients to ResNet-50 v1.5's 161 trainable variables (25.6 M weights),
inside one `tf.function`, for tf-keras' legacy SGD (one fused
ResourceApplyKerasMomentum kernel per variable; what Model Garden and now
official_bench build) and the new `keras.optimizers.SGD` (element-wise ops per
variable). Variants alternate, medians of ms per update are printed with the
share of a training step they would be at a given step time.

    .venv/bin/python benchmarks/optimizer_update.py [--repeats 5] \\
        [--updates 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5,
                   help="timed blocks per optimizer, alternating; the "
                        "median is printed (default 5)")
    p.add_argument("--updates", type=int, default=10,
                   help="updates per timed block (default 10)")
    args = p.parse_args(argv)

    from official_bench.models.resnet import resnet_v15
    from official_bench.runtime.keras_setup import keras, tf

    variables = resnet_v15(50, 1000, 224, keras=keras).trainable_variables
    gen = tf.random.Generator.from_seed(1)
    grads = [gen.normal(v.shape) * 1e-3 for v in variables]
    count = sum(int(v.shape.num_elements()) for v in variables)
    builders = {
        "fused (legacy SGD)": lambda: keras.optimizers.legacy.SGD(
            0.01, momentum=0.875),
        "new keras SGD": lambda: keras.optimizers.SGD(0.01, momentum=0.875),
    }
    steps = {}
    for name, build in builders.items():
        opt = build()

        @tf.function
        def update(opt=opt):
            opt.apply_gradients(zip(grads, variables))
            return opt.iterations.read_value()
        update()  # trace and create slots
        steps[name] = update
    print(f"{len(variables)} variables, {count:,} weights; "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    ms = {name: [] for name in steps}
    for r in range(args.repeats):
        names = list(steps)[r % 2:] + list(steps)[:r % 2]
        for name in names:
            start = time.perf_counter()
            for _ in range(args.updates):
                out = steps[name]()
            int(out)
            ms[name].append((time.perf_counter() - start) / args.updates * 1e3)
    for name, values in ms.items():
        print(f"{name:20s} median {statistics.median(values):7.1f} ms/update "
              f"(all: {', '.join(f'{v:.1f}' for v in values)})")
    names = list(ms)
    fused, new = (statistics.median(ms[n]) for n in names)
    print(f"new - fused: {new - fused:.1f} ms per training step; "
          f"new / fused {new / fused:.2f}; load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
