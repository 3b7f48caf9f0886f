"""benchmarks/vs_model_garden.py: both sides get the same CPU kernels, and
bfloat16 is "not measurable" on a CPU without bf16 units (flags injected:
this machine has AVX512_BF16). Nothing is run or installed."""

import os

import pytest

from support.helpers import load_script

AVX2 = frozenset("avx fma avx2".split())
BF16 = AVX2 | frozenset({"avx512_bf16"})


@pytest.fixture
def bench(monkeypatch):
    module = load_script("benchmarks", "vs_model_garden.py")

    def no_install(venv):
        raise AssertionError("Model Garden must not be set up")
    monkeypatch.setattr(module, "ensure_model_garden", no_install)
    return module


def test_bfloat16_without_bf16_units_is_not_measurable_and_exits_0(
        bench, capsys):
    assert bench.main(["--dtype", "bfloat16"], cpu_flags=AVX2) == 0
    assert "bfloat16: not measurable on this CPU" in capsys.readouterr().out


def test_bfloat16_with_bf16_units_is_measured(bench):
    assert bench.bf16_measurable(["float32", "bfloat16"], BF16) == [
        "float32", "bfloat16"]
    assert bench.bf16_measurable(["float32", "bfloat16"], AVX2) == [
        "float32"]
    with pytest.raises(AssertionError, match="must not be set up"):
        bench.main(["--dtype", "bfloat16"], cpu_flags=BF16)


def test_both_sides_get_the_same_kernels(bench, monkeypatch, capsys):
    """--cpu_kernels resolves into the script's own environment, which
    every side's process inherits (Model Garden has no such setting)."""
    env = "TF_ENABLE_ONEDNN_OPTS"
    assert bench.kernels_value("eigen", {}, AVX2) == "0"
    assert bench.kernels_value("onednn", {env: "0"}, AVX2) == "1"
    assert bench.kernels_value("auto", {}, AVX2) == "1"
    assert bench.kernels_value("auto", {env: "0"}, AVX2) is None  # kept
    assert bench.kernels_value("auto", {}, frozenset({"avx"})) is None
    monkeypatch.delenv(env, raising=False)
    with pytest.raises(AssertionError, match="must not be set up"):
        bench.main(["--dtype", "float32", "--cpu_kernels", "eigen"],
                   cpu_flags=AVX2)
    assert os.environ[env] == "0"
    assert f"{env}=0 (--cpu_kernels eigen)" in capsys.readouterr().out
