"""host_env.cpu_model: the CPU's name for the reports of a CPU run
(issue 28 §3: the PNG and HTML say what a run was measured on)."""

import platform

from official_bench.measure import host_env


def test_cpu_model_reads_the_model_name_line(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\n"
                    "model name\t: AMD EPYC 7B13 64-Core Processor\n"
                    "processor\t: 1\nmodel name\t: AMD EPYC 7B13 64-Core "
                    "Processor\n")
    assert host_env.cpu_model(str(info)) == \
        "AMD EPYC 7B13 64-Core Processor"


def test_cpu_model_falls_back_to_platform(tmp_path):
    assert host_env.cpu_model(str(tmp_path / "missing")) == \
        (platform.processor() or None)
    empty = tmp_path / "empty"
    empty.write_text("processor\t: 0\n")
    assert host_env.cpu_model(str(empty)) == (platform.processor() or None)
