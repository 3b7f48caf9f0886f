"""The GPU samplers the doctor runs during a check (host/probes.py):
nvidia-smi's utilisation lines and the choice of reader."""

import subprocess

import pytest

from official_bench.host import probes
from support.doctor_facts import SMI_UTIL


def test_parse_nvidia_smi_utilisation():
    s = probes.parse_smi_utilisation(SMI_UTIL)
    assert s == [probes.GpuSample(0, 97.0, 15020.0),
                 probes.GpuSample(1, 3.0, 310.0)]
    with pytest.raises(ValueError, match="no utilisation"):
        probes.parse_smi_utilisation("0, [N/A], 100\n")
    with pytest.raises(ValueError, match="unexpected nvidia-smi line"):
        probes.parse_smi_utilisation("0, 97 %, 15020 MiB, x\n")


def test_gpu_sampler_choice():
    def no_nvml():
        raise ImportError("No module named 'pynvml'")
    reader, desc = probes.make_gpu_reader(which=lambda n: None,
                                        import_nvml=no_nvml)
    assert reader is None and desc.startswith("no GPU sampler")
    reader, desc = probes.make_gpu_reader(which=lambda n: "/usr/bin/smi",
                                        import_nvml=no_nvml)
    assert isinstance(reader, probes.SmiReader) and desc == "nvidia-smi"


def test_smi_reader_parses_a_played_answer():
    def run(cmd, **kw):
        assert "--query-gpu=index,utilization.gpu,memory.used" in cmd
        return subprocess.CompletedProcess(cmd, 0, SMI_UTIL, "")
    assert probes.SmiReader(run)()[0].utilisation == 97.0
