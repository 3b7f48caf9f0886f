"""benchmarks/input_workers.py's --decoders: an unknown decoder is refused
naming the valid ones, and the report gives each later decoder's per-core
ratio against the first's, per worker count (its measuring loop is the
benchmark's, run by hand; BENCHMARKS.md)."""

import argparse
import json

import pytest

from support.helpers import load_script


def test_an_unknown_decoder_names_the_valid_ones(capsys):
    bench = load_script("benchmarks", "input_workers.py")
    with pytest.raises(SystemExit) as e:
        bench.main(["--decoders", "simplejpeg,nvjpeg"])
    assert e.value.code == 2
    assert "--decoders nvjpeg: valid: simplejpeg, opencv, pillow, " \
        "nvimgcodec, nvimgcodec_cpu" in capsys.readouterr().err


def test_each_later_decoder_is_a_per_core_ratio_against_the_first(capsys):
    bench = load_script("benchmarks", "input_workers.py")
    names = ["tf.data", "workers=1", "workers=2",
             "workers=1 nvimgcodec_cpu", "workers=2 nvimgcodec_cpu"]
    per_cpu = dict(zip(names, ([500.0], [600.0], [580.0], [660.0],
                               [609.0])))
    wall = dict(zip(names, ([500.0], [600.0], [1160.0], [660.0],
                            [1218.0])))
    args = argparse.Namespace(images=8, image_size=32, batch=4)
    assert bench.report(names, wall, per_cpu, [1, 2], args,
                        ["simplejpeg", "nvimgcodec_cpu"]) == 0
    ratios = json.loads(capsys.readouterr().out.splitlines()[-1])["ratios"]
    assert ratios == {
        "per core workers=1 / tf.data": 1.2,
        "per core workers=2 / tf.data": 1.16,
        "wall workers=2 / workers=1": pytest.approx(1.933, abs=1e-3),
        "per core workers=1 nvimgcodec_cpu / simplejpeg": 1.1,
        "per core workers=2 nvimgcodec_cpu / simplejpeg": 1.05}
