"""A CPU case's MFU is the trainer's: the extractor counts the devices the
runs' result.json counted (flops.devices: worker processes), so a Horovod
or WORKERS_PER_NODE=2 1n2g case (2 processes on one node) is 2 devices and
a mirrored CPU_DEVICES=2 one is 1; one per node where no record says
(walk_upgrade2 U2). GPU cases keep nodes x GPUs and the mismatch warning."""

from official_bench.contracts import flops as flops_contract
from official_bench.contracts.flops import FlopsRecord
from official_bench.extract import extractor as extract, model_flops
from support import logkit as kit

GFLOP = 24.54
PEAK = 1.5  # TFLOP/s of the CPU, per process


def cpu_case(root, case, processes, logical, flops_devices, rate=12.0):
    """One run of ``case`` on one CPU host: ``processes`` worker processes
    (num_workers), each with ``logical`` CPU devices; its result.json's
    flops.devices is ``flops_devices`` (None: not recorded)."""
    logs = root / "bz8"
    rates = [2.0] + [rate] * 5
    path = kit.write_run(logs, case, rates, batch=8)
    replicas = processes * logical
    env = kit.environment(
        gpu_names=[], num_replicas=replicas, num_workers=processes,
        devices=[f"/job:worker/replica:0/task:0/device:CPU:{i}"
                 for i in range(logical)])
    data = kit.result_json([(k * 100, k * 100 + 100, e)
                            for k, e in enumerate(rates)],
                           8 * replicas, replicas, env=env)
    data["flops"] = {"gflop_per_image": GFLOP, "device": "AMD EPYC",
                     "precision": "fp32", "peak_tflops_per_device": PEAK,
                     "peak_source": "CPU fp32 peak at 2.60 GHz"}
    if flops_devices is not None:
        data["flops"]["devices"] = flops_devices
    kit.write_json(path[:-4] + ".json", data)
    return str(logs)


def trainers_mfu(rate, devices):
    return round(FlopsRecord(GFLOP, devices=devices,
                             peak_tflops_per_device=PEAK).mfu_at(rate), 4)


def flops_warnings(extraction):
    return [w for w in extraction.warnings if "flops" in w]


def test_two_processes_on_one_cpu_are_two_devices_as_the_trainer_counts(
        tmp_path):
    # LAUNCHER=horovod CPU_DEVICES=2, or WORKERS_PER_NODE=2: 1n2g, two
    # processes with one CPU device each, each counted with the whole CPU
    logs = cpu_case(tmp_path, "1n2g", processes=2, logical=1,
                    flops_devices=2)
    extraction = extract.extract(logs)
    got = extraction.result["rn50"]["1n2g"][model_flops.KEY]
    assert got["mfu"] == trainers_mfu(12.0, 2)
    assert got["achieved_tflops_per_device"] == \
        round(got["achieved_tflops"] / 2, 4)
    assert flops_warnings(extraction) == []


def test_logical_cpu_devices_of_one_process_are_one_device(tmp_path):
    logs = cpu_case(tmp_path, "1n2g", processes=1, logical=2,
                    flops_devices=1)
    extraction = extract.extract(logs)
    got = extraction.result["rn50"]["1n2g"][model_flops.KEY]
    assert got["mfu"] == trainers_mfu(12.0, 1)
    assert flops_warnings(extraction) == []


def test_without_a_recorded_count_a_cpu_case_is_one_device_per_node(
        tmp_path):
    logs = cpu_case(tmp_path, "2n1g", processes=2, logical=1,
                    flops_devices=None)
    got = extract.extract(logs).result["rn50"]["2n1g"][model_flops.KEY]
    assert got["mfu"] == round(flops_contract.mfu(
        12.0, GFLOP, PEAK, 2), 4)


def test_peak_devices_takes_the_records_count_on_cpus_only():
    two, none = FlopsRecord(GFLOP, devices=2), FlopsRecord(GFLOP)
    assert model_flops.peak_devices(1, 2, "cpu", [two]) == 2
    assert model_flops.peak_devices(1, 2, "cpu", [None, none, two]) == 2
    assert model_flops.peak_devices(1, 2, "cpu", [none]) == 1
    assert model_flops.peak_devices(3, 6, "cpu") == 3
    assert model_flops.peak_devices(2, 16, "gpu", [two]) == 16
    assert model_flops.peak_devices(2, 16, None, [two]) == 16


def test_a_gpu_mismatch_warning_does_not_read_as_mfu_above_one():
    warnings = []
    model_flops.case_flops([FlopsRecord(GFLOP, devices=4,
                                        peak_tflops_per_device=312.0)],
                           590.0, 2, "rn50 1n2g", warnings)
    assert warnings == ["rn50 1n2g: result.json's flops.devices is 4 but "
                        "the case has 2 device(s); MFU is counted over 2 "
                        "device(s)"]
