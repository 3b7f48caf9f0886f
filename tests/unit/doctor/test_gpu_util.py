"""Is the GPU busy while a check trains (doctor/gpu_util.py), from given
samples."""

from official_bench.doctor import gpu_util
from official_bench.host import probes
from support.doctor_facts import SMI_UTIL


def test_busy_verdict_from_given_samples():
    one = probes.parse_smi_utilisation(SMI_UTIL)
    busy = gpu_util.busy([one, one, one], gpus_used=1)
    assert busy.ok and busy.text == "GPU util GPU0 97% (3 samples)"
    idle = gpu_util.busy([one, one], gpus_used=2)  # GPU1 at 3%
    assert not idle.ok and "below 20%" in idle.text
    assert not gpu_util.busy([one], gpus_used=1).ok  # too few samples
    assert "sampler sees 2 GPU(s), the run uses 4" in \
        gpu_util.busy([one, one], gpus_used=4).text
