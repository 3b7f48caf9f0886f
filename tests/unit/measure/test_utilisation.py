"""Per-run utilisation sampler (issue 14 §1): the summary arithmetic, the
/proc readers on this process, and a real CPU run whose result.json and
summary line carry the figures ("no GPU" for the GPU fields here)."""

import json
import os
import threading
import time

import pytest

from official_bench.contracts import utilisation as U
from official_bench.host import probes
from support.helpers import tiny


def test_summary_of_samples():
    samples = [{"gpus": [(0, 90.0, 1000.0), (1, 5.0, 10.0), (2, 80.0, 900.0)],
                "tf_peak": {"/device:GPU:0": 500.0}, "cpu": 0.5,
                "rss_mib": 100.0, "threads": 10},
               {"gpus": [(0, 100.0, 1100.0), (1, 0.0, 10.0),
                         (2, 90.0, 900.0)],
                "tf_peak": {"/device:GPU:0": 700.0}, "cpu": None,
                "rss_mib": 300.0, "threads": 12}]
    u = U.summarise(1.0, samples, "NVML (pynvml)", None, cores=8,
                    gpus_used=2)
    # The run's two GPUs are the two busiest (0 and 2), not GPU 1.
    assert u["gpu"]["run_gpus"] == [0, 2]
    assert u["gpu"]["utilisation_percent"]["mean"] == pytest.approx(90.0)
    assert U.mean_gpu_utilisation(u) == pytest.approx(90.0)
    assert [g["index"] for g in u["gpu"]["per_gpu"]] == [0, 1, 2]
    assert u["tf_peak_memory_mib"]["/device:GPU:0"]["p90"] == 700.0
    # A sample without a CPU interval is left out of the CPU figures only.
    assert u["process"]["cpu_utilisation"] == {"mean": 0.5, "p10": 0.5,
                                               "p90": 0.5}
    assert u["process"]["rss_mib"] == {"mean": 200.0, "p10": 100.0,
                                       "p90": 300.0}
    text = U.summary_text(u)
    assert "GPU util 90% (p10 85%, p90 95%)" in text
    assert "TF peak 700 MiB" in text and "of 8 cores" in text


def test_no_gpu_fields_and_extractor_value():
    u = U.summarise(1.0, [{"gpus": None, "tf_peak": None, "cpu": 0.25,
                           "rss_mib": 50.0, "threads": 3}], None,
                    "TensorFlow sees no GPU", cores=2)
    assert u["gpu"] == U.NO_GPU and u["tf_peak_memory_mib"] == U.NO_GPU
    assert u["gpu_note"] == "TensorFlow sees no GPU"
    assert U.mean_gpu_utilisation(u) is None
    assert U.mean_gpu_utilisation(None) is None
    assert "GPU no GPU; CPU 25% (p10 25%, p90 25%) of 2 cores" in \
        U.summary_text(u)
    assert U.summary_text(None) == ""


def test_proc_readers_on_this_process():
    from official_bench.measure.sampling import ProcessReader
    pid = os.getpid()
    assert probes.thread_count(pid) >= 1
    assert probes.rss_bytes(pid) > 1 << 20
    cpu0, wall0 = time.process_time(), time.monotonic()
    reader = ProcessReader(pid, probes.usable_cores())
    stop = time.monotonic() + 0.5
    while time.monotonic() < stop:  # burn CPU on one core
        pass
    sample = reader()
    cpu1, wall1 = time.process_time(), time.monotonic()
    # The reader's share of the cores is what this process really used
    # (its own CPU clock over the same span), however busy the machine
    # was; and never more than all cores. (Under load the busy thread may
    # get far less than one core, so a fixed floor would test the load.)
    used = (cpu1 - cpu0) / (wall1 - wall0) / reader.cores
    assert cpu1 - cpu0 > 0.02
    assert abs(sample["cpu"] - used) < 0.1
    assert 0 < sample["cpu"] <= 1.05
    assert sample["rss_mib"] > 1 and sample["threads"] >= 1
    assert probes.thread_count(2 ** 22 + 12345) is None  # no such pid


def test_cpu_seconds_parses_a_name_with_spaces(tmp_path):
    (tmp_path / "7").mkdir()
    fields = ["S"] + ["0"] * 10 + ["150", "50"] + ["0"] * 30
    (tmp_path / "7" / "stat").write_text("7 (a b) c) " + " ".join(fields))
    assert probes.cpu_seconds(7, str(tmp_path), ticks=100) == 2.0


def test_gpu_reader_failures_keep_sampling():
    calls = []

    def read():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("nvidia-smi exit 9")
        return len(calls)
    s = probes.PeriodicSampler(read, 0.01).start()
    deadline = time.monotonic() + 5
    while len(s.samples) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    assert s.error == "RuntimeError: nvidia-smi exit 9"
    assert len(s.samples) >= 2


def test_cpu_run_records_utilisation(tmp_path, absl_messages):
    from official_bench import trainer
    before = threading.active_count()
    trainer.run(tiny(train={"steps": 12},
                     runtime={"sample_period_seconds": 0.2}),
                model_dir=str(tmp_path))
    record = json.load(open(tmp_path / "result.json"))
    u = record[U.KEY]
    assert u["samples"] >= 2 and u["period_seconds"] == 0.2
    assert u["gpu"] == U.NO_GPU and u["tf_peak_memory_mib"] == U.NO_GPU
    p = u["process"]
    cores = probes.usable_cores()
    assert p["cores"] == cores
    for stat in ("mean", "p10", "p90"):
        # Fraction of the cores: 0 < cpu x cores <= cores.
        assert 0 < p["cpu_utilisation"][stat] * cores <= cores * 1.05
        assert p["rss_mib"][stat] > 0 and p["threads"][stat] > 0
    assert p["rss_mib"]["p10"] <= p["rss_mib"]["mean"] <= \
        p["rss_mib"]["p90"]
    # The machine's load at the timed loop's start and end, on its CPUs.
    load = u[U.LOAD_KEY]
    assert load["cpu_count"] == os.cpu_count()
    assert load["start"] >= 0 and load["end"] >= 0
    assert U.highest_load(u) == (max(load["start"], load["end"]),
                                 os.cpu_count())
    summary = [m for m in absl_messages if "run finished" in m]
    assert summary and "utilisation (" in summary[-1]
    assert "GPU no GPU; CPU " in summary[-1]
    assert threading.active_count() <= before + 1  # the thread ended
    assert not any(t.name == "utilisation-sampler" and t.is_alive()
                   for t in threading.enumerate())


def test_sampler_off(tmp_path):
    from official_bench import trainer
    trainer.run(tiny(runtime={"sample_period_seconds": 0}),
                model_dir=str(tmp_path))
    assert json.load(open(tmp_path / "result.json"))[U.KEY] is None
