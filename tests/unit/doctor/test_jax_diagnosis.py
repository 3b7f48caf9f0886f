"""Why JAX sees fewer GPUs than nvidia-smi, and the fix
(doctor/jax_diagnosis.py), from faked probe facts and nvidia-smi answers."""

from official_bench.doctor import jax_diagnosis as jd
from official_bench.host import gpu_diagnosis as gd
from support.doctor_facts import NO_SMI, jax_facts, smi

H200 = ("NVIDIA H200",)


def test_jax_sees_every_gpu_or_the_ones_cuda_visible_devices_lists():
    assert jd.diagnose(jax_facts(8), smi(*H200 * 8)) == (
        "JAX sees 8 GPU(s)", None)
    assert jd.diagnose(jax_facts(2), smi(*H200 * 8), "0,1").ok
    fewer = jd.diagnose(jax_facts(6), smi(*H200 * 8))
    assert fewer.verdict == "JAX sees 6 GPU(s) but nvidia-smi lists 8"
    assert "jax.devices()" in fewer.fix


def test_no_gpu_in_the_machine_is_worded_as_for_tensorflow():
    d = jd.diagnose(jax_facts(0), NO_SMI)
    assert d == gd.diagnose({"is_cuda_build": True}, [], NO_SMI)
    assert d.verdict.startswith("no NVIDIA driver: nvidia-smi is not on PATH")
    assert "TensorFlow" not in d.verdict + d.fix
    empty = jd.diagnose(jax_facts(0), gd.SmiFacts(True, True, ()))
    assert empty.verdict == "nvidia-smi lists no GPU"


def test_cpu_only_jaxlib_gets_the_cuda_build_the_driver_runs():
    new = jd.diagnose(jax_facts(0), smi(*H200 * 8, driver="580.159.04"))
    assert new.verdict == (
        "nvidia-smi lists 8 GPU(s) but JAX sees none: jaxlib 0.11.2 is "
        "CPU-only: no JAX CUDA plugin (jax-cuda12-plugin, "
        "jax-cuda13-plugin) is installed")
    assert new.fix == ("pip install 'jax[cuda13]==0.11.2' (driver "
                       "580.159.04 runs CUDA 13)")
    old = jd.diagnose(jax_facts(0), smi("A100", driver="550.54.15"))
    assert old.fix.startswith("pip install 'jax[cuda12]==0.11.2'")
    ancient = jd.diagnose(jax_facts(0), smi("V100", driver="470.57.02"))
    assert "too old for JAX's CUDA builds" in ancient.verdict
    assert ancient.fix.startswith("upgrade the NVIDIA driver to 580")


def test_cuda13_plugin_on_a_cuda12_driver():
    facts = jax_facts(0, plugins={"jax-cuda13-plugin": "0.11.2"},
                      gpu_error="no supported devices found for CUDA")
    d = jd.diagnose(facts, smi("A100", driver="550.54.15"))
    assert ("NVIDIA driver 550.54.15 is too old for jax-cuda13-plugin "
            "0.11.2: CUDA 13.x needs driver >= 580") in d.verdict
    assert "(no supported devices found for CUDA)" in d.verdict
    assert d.fix == ("upgrade the NVIDIA driver to 580 or newer, or pip "
                     "install 'jax[cuda12]==0.11.2'")


def test_plugin_of_another_jaxlib_and_a_plugin_that_failed():
    stale = jd.diagnose(
        jax_facts(0, plugins={"jax-cuda13-plugin": "0.10.0"},
                  gpu_error="version mismatch"),
        smi(*H200, driver="580.159.04"))
    assert "jax-cuda13-plugin 0.10.0 does not match jaxlib 0.11.2" in \
        stale.verdict
    assert stale.fix.startswith("pip install 'jax[cuda13]==0.11.2'")
    failed = jd.diagnose(
        jax_facts(0, plugins={"jax-cuda13-plugin": "0.11.2"},
                  gpu_error="Unable to load cuDNN. Is it installed?"),
        smi(*H200, driver="580.159.04"))
    assert failed.verdict.endswith(
        "JAX's CUDA plugin (jax-cuda13-plugin 0.11.2) did not initialise: "
        "Unable to load cuDNN. Is it installed?")
    assert failed.fix.startswith("pip install 'jax[cuda13]==0.11.2' again")


def test_cuda_visible_devices_hiding_every_gpu():
    for hidden in ("", "-1", "8", "none", "9,0"):
        d = jd.diagnose(jax_facts(0), smi(*H200 * 8), hidden)
        assert f"CUDA_VISIBLE_DEVICES={hidden!r} hides every GPU" in \
            d.verdict, hidden
        assert d.fix.startswith("unset CUDA_VISIBLE_DEVICES")
    assert "hides" not in jd.diagnose(jax_facts(0), smi(*H200), "0").verdict
    no_jax = jd.diagnose(None, smi(*H200), "")
    assert no_jax.fix.startswith("(1) unset CUDA_VISIBLE_DEVICES")
    assert "(2) pip install -e '.[jax]'" in no_jax.fix
