"""benchmarks/bn_traffic.py: the batch norms' input elements it reads from
the suite's ResNet-50 equal ResNet-50 v1.5's architecture worked out by
hand (the stem, then each stage's blocks: a first block's 1x1 convolution
at the stage's input resolution, the stride on the 3x3, a projection
shortcut), and its report's arithmetic."""

import argparse

from support.helpers import load_script

# (blocks, width, output resolution at 224) of ResNet-50's four stages
STAGES = [(3, 64, 56), (4, 128, 28), (6, 256, 14), (3, 512, 7)]


def _by_hand(image_size=224):
    scale = image_size // 224
    stem = (112 * scale) ** 2 * 64
    total, count, res_in = stem, 1, 56 * scale
    for blocks, width, res in STAGES:
        res *= scale
        first = (res_in ** 2 * width + res ** 2 * width
                 + 2 * res ** 2 * 4 * width)  # bn1, bn2, bn3, projection
        rest = (blocks - 1) * res ** 2 * (width + width + 4 * width)
        total += first + rest
        count += 4 + 3 * (blocks - 1)
        res_in = res
    return total, count


def test_the_counted_elements_are_resnet50_v15s():
    m = load_script("benchmarks", "bn_traffic.py")
    model, keras = m.build_resnet50(224)
    layers = m.bn_input_elements(model, keras)
    total, count = _by_hand()
    assert (sum(n for _, n in layers), len(layers)) == (total, count)
    assert (total, count) == (11_113_984, 53)


def test_the_report_sets_the_bound_against_the_measurement():
    m = load_script("benchmarks", "bn_traffic.py")
    args = argparse.Namespace(batch=256, image_size=224, bytes=2,
                              bandwidth=4.0, passes=8.0, measured_ms=20.0)
    text = m.report(1_000_000, 53, args)
    # 256 M elements x 2 bytes = 0.512 GB; / 4 TB/s = 0.128 ms a pass
    assert "0.256 G elements, 0.51 GB a pass" in text
    assert "one pass at 4.00 TB/s: 0.128 ms; 8 passes (the fused " \
           "minimum): 1.02 ms" in text
    assert "measured BN/elementwise 20.00 ms: 0.05 of the bound's speed; " \
           "at the bound the step would be 19.0 ms shorter" in text
    args.measured_ms = 0
    assert "measured" not in m.report(1_000_000, 53, args)
