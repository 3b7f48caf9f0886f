"""official-bench-doctor's command line (doctor/cli.py): --help, --list,
--only, and the plan when TensorFlow does not start."""

import os

import pytest

from official_bench.doctor import check_plan as plan
from official_bench.doctor import cli
from official_bench.host import gpu_diagnosis as gd
from support.doctor_facts import NO_SMI


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


def test_cli_help_lists_every_kind_and_rejects_unknown_only(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for kind in plan.KIND_HELP:
        assert f"  {kind} " in out
    assert "within 15%" in out and "--only" in out


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
