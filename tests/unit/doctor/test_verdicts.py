"""Pass/fail from numbers a run produced (doctor/verdicts.py)."""

from official_bench.doctor import verdicts


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
