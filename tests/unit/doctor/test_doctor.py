"""official-bench-doctor: the GPU diagnosis, the plan, the verdicts, the
report, and the CPU subset run for real.

GPU branches are tested from faked device lists and faked nvidia-smi output
only where what is tested is a decision made from them (which checks run,
how GPUs are split between workers, why TensorFlow sees no GPU, pass/fail
from given numbers); no measurement is faked.
"""

import os
import subprocess
import sys
import textwrap
import time

import pytest

from support.helpers import REPO, cli_env
from official_bench import config
from official_bench.doctor import (
    cli, commands, env_checks, gpu_util, check_plan as plan, report, run_checks, threads, verdicts)
from official_bench.doctor.commands import CPU_PROFILE, GPU_PROFILE
from official_bench.doctor.check_procs import Command, ProcessGroup
from official_bench.host import probes
from official_bench.host.probes import PeriodicSampler
from official_bench.host import gpu_diagnosis as gd

CUDA_BUILD = {"is_cuda_build": True, "cuda_version": "12.5.1",
              "cudnn_version": "9",
              "cuda_compute_capabilities": ["sm_60", "sm_70", "sm_80",
                                            "sm_89", "compute_90"]}
CPU_BUILD = {"is_cuda_build": False, "is_rocm_build": False}


def smi(*gpus, driver="550.54.15", cap="8.0"):
    return gd.SmiFacts(found=True, ok=True, gpus=tuple(
        gd.SmiGpu(i, name, driver, cap) for i, name in enumerate(gpus)))


NO_SMI = gd.SmiFacts(found=False)


# ------------------------------------------------------------ diagnosis

def test_diagnosis_gpus_visible_is_ok():
    d = gd.diagnose(CUDA_BUILD, ["/physical_device:GPU:0"], smi("A100"))
    assert d.ok and d.fix is None
    assert d.verdict == "TensorFlow sees 1 GPU(s)"
    verdict, fix = d  # unpacks as a pair
    assert fix is None


def test_diagnosis_no_driver():
    verdict, fix = gd.diagnose(CUDA_BUILD, [], NO_SMI, tf_version="2.21.0")
    assert "nvidia-smi is not on PATH" in verdict
    assert "install the NVIDIA driver" in fix
    assert "tensorflow[and-cuda]" not in fix  # the wheel is fine


def test_diagnosis_cpu_only_build_with_gpus():
    verdict, fix = gd.diagnose(CPU_BUILD, [], smi("V100"),
                               tf_version="2.21.0")
    assert "CPU-only build" in verdict
    assert fix.startswith("pip install 'tensorflow[and-cuda]==2.21.0'")


def test_diagnosis_cpu_build_and_no_driver_lists_both_fixes():
    verdict, fix = gd.diagnose(CPU_BUILD, [], NO_SMI, tf_version="2.21.0")
    assert "nvidia-smi" in verdict and "CPU-only" in verdict
    assert fix.startswith("(1) install the NVIDIA driver")
    assert "(2) pip install 'tensorflow[and-cuda]==2.21.0'" in fix


def test_diagnosis_cuda_libraries_missing():
    verdict, fix = gd.diagnose(CUDA_BUILD, [], smi("V100", "V100"),
                               tf_version="2.21.0")
    assert "nvidia-smi lists 2 GPU(s) (driver 550.54.15)" in verdict
    assert "CUDA 12.5.1 / cuDNN 9 libraries" in verdict
    assert "tensorflow[and-cuda]==2.21.0" in fix


def test_diagnosis_driver_too_old_for_cuda_12():
    verdict, fix = gd.diagnose(CUDA_BUILD, [], smi("V100", driver="470.82.01"))
    assert "driver 470.82.01 is too old for CUDA 12.5.1" in verdict
    assert "525.60.13" in fix
    # 525.60.13 itself is new enough: then the libraries are blamed.
    verdict, _ = gd.diagnose(CUDA_BUILD, [], smi("V100", driver="525.60.13"))
    assert "libraries" in verdict


def test_diagnosis_compute_capability_too_low():
    verdict, fix = gd.diagnose(CUDA_BUILD, [], smi("K80", cap="3.7"))
    assert "compute capability 3.7" in verdict and "(6.0)" in verdict
    assert "supported compute capability" in fix


@pytest.mark.parametrize("cvd", ["", "-1", "7"])
def test_diagnosis_cuda_visible_devices_hides_all(cvd):
    verdict, fix = gd.diagnose(CUDA_BUILD, [], smi("A100", "A100"),
                               cuda_visible=cvd)
    assert f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU" in verdict
    assert "unset CUDA_VISIBLE_DEVICES" in fix


def test_diagnosis_smi_fails():
    facts = gd.SmiFacts(found=True, ok=False, error="NVIDIA-SMI has failed "
                        "because it couldn't communicate with the NVIDIA "
                        "driver.")
    verdict, fix = gd.diagnose(CUDA_BUILD, [], facts)
    assert verdict.startswith("nvidia-smi fails: NVIDIA-SMI has failed")
    assert "reinstall the driver" in fix


def test_diagnosis_fewer_gpus_than_smi():
    d = gd.diagnose(CUDA_BUILD, ["GPU:0"], smi("A", "B"))
    assert "but nvidia-smi lists 2" in d.verdict and not d.ok
    # A deliberate CUDA_VISIBLE_DEVICES=0 is not a problem.
    assert gd.diagnose(CUDA_BUILD, ["GPU:0"], smi("A", "B"),
                       cuda_visible="0").ok


def _fake_run(outputs):
    """A subprocess.run stand-in that plays nvidia-smi's answers in order."""
    calls = []

    def run(cmd, **kwargs):
        calls.append(cmd)
        rc, out = outputs[len(calls) - 1]
        return subprocess.CompletedProcess(cmd, rc, out, "")
    return run, calls


def test_probe_nvidia_smi_parses_and_falls_back_for_old_drivers():
    run, calls = _fake_run([
        (2, 'Field "compute_cap" is not a valid field to query.\n'),
        (0, "0, Tesla V100-SXM2-16GB, 470.82.01\n"
            "1, Tesla V100-SXM2-16GB, 470.82.01\n")])
    facts = gd.probe_nvidia_smi(run=run, which=lambda name: "/usr/bin/x")
    assert facts.ok and len(facts.gpus) == 2
    assert facts.gpus[1] == gd.SmiGpu(1, "Tesla V100-SXM2-16GB", "470.82.01")
    assert facts.driver_version == "470.82.01"
    assert "compute_cap" in calls[0][1] and "compute_cap" not in calls[1][1]


def test_probe_nvidia_smi_absent_and_failing():
    assert gd.probe_nvidia_smi(which=lambda n: None) == gd.SmiFacts(False)
    run, _ = _fake_run([(9, "NVIDIA-SMI has failed\nmore\n")] * 2)
    facts = gd.probe_nvidia_smi(run=run, which=lambda n: "/x")
    assert facts.found and not facts.ok
    assert facts.error == "NVIDIA-SMI has failed"


def test_parse_smi_rejects_unknown_format():
    with pytest.raises(ValueError, match="unexpected nvidia-smi line"):
        gd.parse_smi_gpus("GPU 0: Tesla V100 (UUID: GPU-123)\n")
    assert gd.parse_smi_gpus("0, A100, 535.1, 8.0\n")[0].compute_cap == "8.0"


# ------------------------------------------------------------ the plan

AMPERE, VOLTA = (8, 0), (7, 0)
NO_GPU = "no GPU visible to TensorFlow: no NVIDIA driver"


def planned(n, caps=AMPERE, horovod_skip=None, quick=False):
    ids = [str(i) for i in range(n)]
    return {c.name: c for c in plan.plan(
        ids, [caps] * n, None if n else NO_GPU, horovod_skip, quick)}


def test_plan_without_gpu_skips_every_gpu_check_and_runs_the_cpu_subset():
    checks = planned(0)
    gpu = [c for c in checks.values() if c.device == "gpu"]
    assert len(gpu) == 12 + 3
    assert all(c.skip == NO_GPU for c in gpu)
    cpu = {n for n, c in checks.items() if c.device == "cpu" and not c.skip}
    assert cpu == {"cpu-fp32-xla_off", "cpu-fp32-xla_on", "cpu-bf16-xla_off",
                   "cpu-fp16-xla_off", "cpu-mirrored-2dev",
                   "cpu-multi_worker-2x1", "cpu-horovod-2rank"}
    assert checks["cpu-mirrored-2dev"].run.cpu_devices == 2
    assert checks["cpu-mirrored-2dev"].baseline == "cpu-fp32-xla_off"
    assert list(checks)[:2] == ["tensorflow", "gpus"]


def test_plan_one_gpu_runs_the_matrix_and_skips_multi_gpu_checks():
    checks = planned(1)
    singles = [c for c in checks.values() if c.kind == "single"]
    assert len(singles) == 12 and not any(c.skip for c in singles)
    assert {(c.run.dtype, c.run.data_format, c.run.xla) for c in singles} \
        == {(d, f, x) for d in ("fp32", "fp16", "bf16")
            for f in ("channels_first", "channels_last") for x in (0, 1)}
    assert all(c.run.num_gpus == 1 and c.run.strategy == "one_device"
               for c in singles)
    for name in ("mirrored-2gpu", "multi_worker-2x1gpu"):
        assert checks[name].skip == "needs 2 or more GPUs; TensorFlow sees 1"
    assert not checks["horovod-1gpu"].skip
    assert not any(c.device == "cpu" for c in checks.values())


def test_plan_two_gpus_split_one_per_worker():
    checks = planned(2)
    m = checks["mirrored-2gpu"]
    assert not m.skip and m.run.num_gpus == 2 and m.expected_replicas == 2
    assert m.baseline == "1gpu-fp32-channels_last-xla_off"
    mw = checks["multi_worker-2x1gpu"]
    assert mw.run.visible_devices == ("0", "1") and mw.run.num_gpus == 1
    assert mw.expected_replicas == 2 and mw.run.processes == 2


def test_plan_eight_gpus_split_four_per_worker():
    checks = planned(8, horovod_skip="Horovod venv not built at /x")
    mw = checks["multi_worker-2x4gpu"]
    assert mw.run.visible_devices == ("0,1,2,3", "4,5,6,7")
    assert mw.run.num_gpus == 4 and mw.expected_replicas == 8
    assert checks["mirrored-8gpu"].expected_replicas == 8
    assert checks["horovod-8gpu"].skip == "Horovod venv not built at /x"
    assert checks["horovod-8gpu"].run.processes == 8


def test_plan_bf16_skipped_below_ampere_and_quick_plan():
    checks = planned(1, caps=VOLTA)
    bf16 = [c for c in checks.values() if c.run and c.run.dtype == "bf16"]
    assert bf16 and all("compute capability >= 8.0; GPU has 7.0" in c.skip
                        for c in bf16)
    quick = planned(2, quick=True)
    singles = sorted(n for n, c in quick.items() if c.kind == "single")
    assert singles == ["1gpu-fp16-channels_last-xla_off",
                       "1gpu-fp32-channels_last-xla_off"]
    assert quick["mirrored-2gpu"].baseline in quick


def test_plan_when_tensorflow_does_not_start():
    """One FAIL (the tensorflow row) instead of a failure per run."""
    why = "TensorFlow did not start: ImportError: libcudart.so.12"
    machine = cli.Machine(None, "ImportError: libcudart.so.12", NO_SMI,
                          gd.Diagnosis("x", "y"), None, "no GPU", None,
                          "Horovod venv not built at /x", why)
    checks = cli.plan_for(machine, quick=True)
    runs = [c for c in checks if c.kind not in ("tensorflow", "gpus")]
    assert runs and all(c.skip for c in runs)
    assert {c.skip for c in runs if c.device == "cpu"
            and c.kind != "horovod"} == {why}


def test_select_by_glob_keeps_environment_rows_and_rejects_unknown():
    checks = list(planned(0).values())
    chosen = [c.name for c in plan.select(checks, ["cpu-fp*"])]
    assert chosen == ["tensorflow", "gpus", "cpu-fp32-xla_off",
                      "cpu-fp32-xla_on", "cpu-fp16-xla_off"]
    with pytest.raises(ValueError, match="matches no check; valid: "
                                         "tensorflow, gpus, 1gpu-"):
        plan.select(checks, ["mirored"])


def test_every_planned_run_is_a_valid_trainer_config():
    """The overrides of each run (GPU ones included) pass the trainer's own
    strict config check and mean what the check's name says."""
    specs = list(planned(8).values()) + list(planned(0).values())
    for spec in (s for s in specs if s.run):
        profile = CPU_PROFILE if spec.device == "cpu" else GPU_PROFILE
        pairs = commands.overrides(spec.run, profile)
        if spec.run.strategy == "multi_worker_mirrored":
            pairs += commands.worker_overrides(
                ["127.0.0.1:1", "127.0.0.1:2"], 1, 60)
        cfg = config.load_config(params_override=",".join(pairs))
        rt = cfg.runtime
        assert rt.distribution_strategy == spec.run.strategy
        assert rt.num_gpus == spec.run.num_gpus
        assert rt.enable_xla is spec.run.xla
        assert config.compute_dtype(cfg) == commands.DTYPE_NAMES[
            spec.run.dtype], spec.name
        assert cfg.model.model_params.data_format == spec.run.data_format
        assert cfg.train.steps == profile.steps
        assert cfg.train_dataset.builder == "synthetic"
    cpu = config.load_config(params_override=",".join(commands.overrides(
        planned(0)["cpu-mirrored-2dev"].run, CPU_PROFILE)))
    assert cpu.runtime.cpu_devices == 2 and cpu.model.name == "resnet_cifar"


def test_horovod_and_worker_commands():
    argv = commands.horovod_argv("/v", 8, "/m", ["a=1"])
    assert argv[:7] == ["/v/bin/horovodrun", "-np", "8", "-H", "localhost:8",
                        "--gloo", "/v/bin/python"]
    assert argv[-1] == "--params_override=a=1"
    env = commands.child_env({"TF_CONFIG": "{}", "A": "1"},
                             {"CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    assert "TF_CONFIG" not in env and env["A"] == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"


# ------------------------------------------------------------ verdicts

def test_scaling_within_15_percent_both_ways():
    ok = verdicts.scaling(400.0, 2800.0, 8)  # 350 per GPU = 88%
    assert ok.ok and "350.0 img/s per device = 88% of 1-device 400.0" \
        in ok.text
    slow = verdicts.scaling(400.0, 2600.0, 8)  # 325 = 81%
    assert not slow.ok and "(must be within 15%)" in slow.text
    assert "nvidia-smi topo -m" in slow.fix
    assert not verdicts.scaling(400.0, 3800.0, 8).ok  # 119%: bad baseline
    assert verdicts.scaling(400.0, 3680.0, 8).ok  # 115% exactly
    assert not verdicts.scaling(None, 2800.0, 8).ok


def test_finite_loss_replicas_devices():
    assert verdicts.finite_loss({"loss": [2.3, 2.1]}).ok
    nan = verdicts.finite_loss({"loss": [2.3, None]})  # NaN is null in JSON
    assert not nan.ok and "not finite" in nan.text
    assert not verdicts.finite_loss({}).ok
    assert verdicts.replicas({"num_replicas": 8}, 8).ok
    assert verdicts.replicas({"num_replicas": 1}, 8).text == \
        "replicas 1, expected 8"
    gpu_env = {"configured_devices": ["/gpu:0", "/gpu:1"],
               "replicas_per_worker": 2,
               "devices": ["/job:worker/replica:0/task:0/device:GPU:0",
                           "/job:worker/replica:0/task:0/device:GPU:1"]}
    d = verdicts.devices(gpu_env, "GPU", 2)
    assert d.ok and d.text == "devices GPU:0,GPU:1"
    cpu_env = dict(gpu_env, devices=[
        "/job:worker/replica:0/task:0/device:CPU:0"], replicas_per_worker=1)
    assert not verdicts.devices(cpu_env, "GPU", 2).ok
    old = verdicts.devices({"devices": ["/gpu:0"]}, "GPU", 1)
    assert not old.ok and "trainer too old" in old.text


def test_precision():
    assert verdicts.precision({"dtype": "bfloat16"}, "bfloat16").ok
    wrong = verdicts.precision({"dtype": "float32"}, "float16")
    assert not wrong.ok and wrong.text == "dtype float32, expected float16"


def test_same_losses():
    assert verdicts.same_losses([{"loss": [2.0]}, {"loss": [2.0000001]}]).ok
    assert not verdicts.same_losses([{"loss": [2.0]}, {"loss": [2.5]}]).ok


# ------------------------------------------------------------ samplers

SMI_UTIL = "0, 97, 15020\n1, 3, 310\n"


def test_parse_nvidia_smi_utilisation():
    s = probes.parse_smi_utilisation(SMI_UTIL)
    assert s == [probes.GpuSample(0, 97.0, 15020.0),
                 probes.GpuSample(1, 3.0, 310.0)]
    with pytest.raises(ValueError, match="no utilisation"):
        probes.parse_smi_utilisation("0, [N/A], 100\n")
    with pytest.raises(ValueError, match="unexpected nvidia-smi line"):
        probes.parse_smi_utilisation("0, 97 %, 15020 MiB, x\n")


def test_busy_verdict_from_given_samples():
    one = probes.parse_smi_utilisation(SMI_UTIL)
    busy = gpu_util.busy([one, one, one], gpus_used=1)
    assert busy.ok and busy.text == "GPU util GPU0 97% (3 samples)"
    idle = gpu_util.busy([one, one], gpus_used=2)  # GPU1 at 3%
    assert not idle.ok and "below 20%" in idle.text
    assert not gpu_util.busy([one], gpus_used=1).ok  # too few samples
    assert "sampler sees 2 GPU(s), the run uses 4" in \
        gpu_util.busy([one, one], gpus_used=4).text


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


GROW = textwrap.dedent("""
    import sys, threading, time
    ev = threading.Event()
    for _ in range(int(sys.argv[1])):
        threading.Thread(target=ev.wait, daemon=True).start()
        time.sleep(0.02)
    print("TimeHistory: started", flush=True)
    for _ in range(int(sys.argv[2])):
        threading.Thread(target=ev.wait, daemon=True).start()
        time.sleep(0.02)
    time.sleep(0.6)
""")


@pytest.mark.parametrize("after,leaks", [(0, False), (60, True)])
def test_thread_sampler_on_real_processes(tmp_path, after, leaks):
    """Two real processes; one variant keeps starting threads after the
    warm-up mark, as a per-collective leak does."""
    cmds = [Command([sys.executable, "-c", GROW, "5", str(after)],
                    dict(os.environ), str(tmp_path / f"w{i}.log"))
            for i in range(2)]
    group = ProcessGroup(cmds, str(tmp_path)).start()
    sampler = PeriodicSampler(threads.reader(group.pids), 0.1).start()
    outcomes = group.wait(60)
    sampler.stop()
    assert [o.returncode for o in outcomes] == [0, 0]
    assert group.warm_time is not None
    samples = sampler.between(group.warm_time,
                              min(o.end_time for o in outcomes))
    verdict = threads.stable(samples, group.pids)
    assert verdict.ok is (not leaks), verdict.text
    if leaks:
        assert "thread leak" in verdict.text
        assert "collective_timeout_seconds" in verdict.fix


def test_thread_count_of_a_gone_process_is_none():
    assert threads.thread_count(os.getpid()) >= 1
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                       capture_output=True, text=True)
    assert threads.thread_count(int(p.stdout)) is None


def test_timeout_kills_a_process_that_ignores_sigterm(tmp_path):
    code = ("import signal, time; signal.signal(signal.SIGTERM, "
            "signal.SIG_IGN); print('up', flush=True); time.sleep(120)")
    group = ProcessGroup([Command([sys.executable, "-c", code],
                                  dict(os.environ), str(tmp_path / "x.log"))],
                         str(tmp_path)).start()
    start = time.monotonic()
    [outcome] = group.wait(1.5)
    assert group.timed_out and outcome.returncode == -9
    assert time.monotonic() - start < 30
    assert "up" in open(tmp_path / "x.log").read()


# ------------------------------------------------------------ rows and report

def test_gpus_row_verdicts():
    no_smi = gd.diagnose(CUDA_BUILD, [], NO_SMI)
    row = env_checks.gpus_row({"gpus": []}, NO_SMI, no_smi, "no GPU")
    assert row.result == report.SKIP
    assert row.detail.startswith("no GPU visible to TensorFlow: no NVIDIA")
    assert env_checks.gpus_row({"gpus": []}, NO_SMI, no_smi, "no GPU",
                               require_gpu=True).result == report.FAIL
    facts = smi("V100", "V100")
    missing = gd.diagnose(CUDA_BUILD, [], facts, tf_version="2.21.0")
    row = env_checks.gpus_row({"gpus": []}, facts, missing, "nvidia-smi")
    assert row.result == report.FAIL and "tensorflow[and-cuda]" in row.fix
    tf_facts = {"gpus": [{"name": f"/physical_device:GPU:{i}",
                          "device_name": "NVIDIA A100-SXM4-40GB",
                          "compute_capability": [8, 0]} for i in range(2)]}
    ok = gd.diagnose(CUDA_BUILD, env_checks.gpu_names(tf_facts),
                     smi("A100", "A100"))
    row = env_checks.gpus_row(tf_facts, smi("A100", "A100"), ok,
                              "NVML (pynvml)")
    assert row.result == report.PASS
    assert row.detail == ("2 x NVIDIA A100-SXM4-40GB (compute 8.0), driver "
                          "550.54.15 (nvidia-smi); utilisation via NVML "
                          "(pynvml); peak A100 SXM: fp32 156 (TF32), fp16 "
                          "312, bf16 312 TFLOP/s dense (NVIDIA A100 Tensor "
                          "Core GPU datasheet)")
    assert list(row.data["peaks"]) == ["NVIDIA A100-SXM4-40GB"]
    assert env_checks.capabilities(tf_facts) == [(8, 0), (8, 0)]


def test_tensorflow_row():
    row = env_checks.tensorflow_row(None, "TensorFlow probe failed (exit 1):"
                                          " ImportError: libcudart")
    assert row.result == report.FAIL and "libcudart" in row.detail
    row = env_checks.tensorflow_row(
        {"tensorflow": "2.21.0", "tf_keras": "2.18.0", "build": CPU_BUILD},
        None)
    assert row.result == report.FAIL and "different minor" in row.detail


def test_report_table_json_and_exit_status(tmp_path):
    rows = [report.CheckResult("tensorflow", "tensorflow", "none",
                               report.PASS, "TensorFlow 2.21.0"),
            report.CheckResult("1gpu-fp32-channels_last-xla_off", "single",
                               "gpu", report.SKIP, NO_GPU)]
    assert report.exit_status(rows) == 0
    text = report.table(rows, NO_GPU)
    lines = text.splitlines()
    assert lines[0].split() == ["check", "result", "detail"]
    assert lines[3].split()[:2] == ["1gpu-fp32-channels_last-xla_off",
                                    "SKIP"]
    assert "1 passed, 0 failed, 1 skipped" in text
    assert f"GPU checks skipped: {NO_GPU}" in text
    rows.append(report.CheckResult("cpu-x", "single", "cpu", report.FAIL,
                                   "loss not finite", fix="lower the LR"))
    assert report.exit_status(rows) == 1
    assert "fix cpu-x: lower the LR" in report.table(rows)
    path = tmp_path / "d" / "doctor.json"
    report.write(str(path), report.document(rows, {"a": 1}, "t0", "t1",
                                            NO_GPU))
    doc = report.load(str(path))
    assert doc["complete"] and doc["exit_status"] == 1
    assert doc["summary"] == {"PASS": 1, "FAIL": 1, "SKIP": 1}
    assert doc["checks"][2]["fix"] == "lower the LR"
    assert os.listdir(path.parent) == ["doctor.json"]  # no temp file left
    partial = report.document(rows, {}, "t0", None, None)
    assert partial["complete"] is False and partial["exit_status"] is None


# ------------------------------------------------------------ running checks

def _ctx(tmp_path, **kw):
    args = dict(python=sys.executable, repo=REPO, workdir=str(tmp_path),
                env=cli_env(), timeouts={"cpu": 120, "gpu": 120},
                profiles={"cpu": CPU_PROFILE, "gpu": GPU_PROFILE},
                progress=lambda line: None)
    args.update(kw)
    return run_checks.RunContext(**args)


def test_run_check_reports_a_failed_process(tmp_path):
    spec = planned(0)["cpu-fp32-xla_off"]
    result = run_checks.run_check(spec, _ctx(tmp_path, python="/bin/false"),
                                  {}, {})
    assert result.result == report.FAIL
    assert result.detail == "train exit 1: no output"
    assert result.fix.startswith("logs: ")


def test_run_check_timeout_is_named(tmp_path):
    spec = planned(0)["cpu-fp32-xla_off"]
    start = time.monotonic()
    result = run_checks.run_check(
        spec, _ctx(tmp_path, timeouts={"cpu": 1.0, "gpu": 1.0}), {}, {})
    assert result.result == report.FAIL
    assert result.detail == "timeout: not finished within 1 s (killed)"
    assert "raise --timeout" in result.fix
    assert result.data["returncodes"] in ([-9], [-15], [143])
    assert time.monotonic() - start < 30


def test_cli_help_lists_every_kind_and_rejects_unknown_only(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for kind in plan.KIND_HELP:
        assert f"  {kind} " in out
    assert "within 15%" in out and "--only" in out


def test_interrupted_check_kills_its_processes(tmp_path, monkeypatch):
    """Ctrl-C during a check ends the trainer processes too (they run in
    their own sessions, so the terminal's SIGINT does not reach them)."""
    fake = tmp_path / "fakepython"
    fake.write_text("#!/bin/bash\ntrap '' TERM\necho $$ > "
                    f"{tmp_path}/pid\nsleep 120\n")
    fake.chmod(0o755)
    monkeypatch.setattr(run_checks, "HEARTBEAT_SECONDS", 0.5)

    def interrupt(line):
        if (tmp_path / "pid").exists():  # the fake trainer is up
            raise KeyboardInterrupt
    spec = planned(0)["cpu-fp32-xla_off"]
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_checks.run_check(spec, _ctx(tmp_path, python=str(fake),
                                        progress=interrupt), {}, {})
    pid = int((tmp_path / "pid").read_text())
    assert threads.thread_count(pid) is None  # gone (SIGKILL after TERM)
    assert time.monotonic() - start < 30


def test_gpu_run_without_a_sampler_is_not_called_busy():
    spec = planned(2)["mirrored-2gpu"]
    ctx = run_checks.RunContext(
        python=sys.executable, repo=REPO, workdir="/nonexistent", env={},
        timeouts={}, profiles={},
        gpu_reader_desc="no GPU sampler: pynvml unusable and nvidia-smi "
                        "not on PATH")
    finding = run_checks._busy(spec, None, (None, None), ctx, {})
    assert not finding.ok
    assert finding.text == ("GPU busy unknown: no GPU sampler: pynvml "
                            "unusable and nvidia-smi not on PATH")


def test_cli_list_and_bad_only_on_this_machine(capsys):
    """main() wired to the real probes: this machine has no GPU."""
    lines = []
    env = {"CUDA_VISIBLE_DEVICES": ""}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        assert cli.main(["--list", "--only", "cpu-m*"], out=lines.append) \
            == 0
        with pytest.raises(SystemExit) as e:
            cli.main(["--list", "--only", "1gpu-fp64-*"], out=print)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--only '1gpu-fp64-*' matches no check; valid: tensorflow" in err
    listed = [l.split()[0] for l in lines[1:]]
    assert listed == ["tensorflow", "gpus", "cpu-mirrored-2dev",
                      "cpu-multi_worker-2x1"]
    assert "GPU checks will be skipped" not in "\n".join(lines)  # --list
