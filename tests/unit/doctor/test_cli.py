"""official-bench-doctor's command line (doctor/cli.py): --help, --list,
--only, --backend's choice, and the plan when the backend does not
start."""

import os

import pytest

from official_bench.doctor import check_plan as plan, cli
from official_bench.host import gpu_diagnosis as gd
from support.doctor_facts import NO_SMI, jax_facts


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


TF_FACTS = {"tensorflow": "2.21.0", "gpus": []}
NO_TF = (None, "TensorFlow probe failed (exit 1): ModuleNotFoundError: No "
               "module named 'tensorflow'")


class Probes:
    """Fake probes that count their calls."""

    def __init__(self, tf, jax):
        self.answers, self.calls = {"tf": tf, "jax": jax}, []

    def __getattr__(self, name):
        def probe():
            self.calls.append(name)
            return self.answers[name]
        return probe


def test_auto_picks_tensorflow_when_it_imports_else_jax():
    p = Probes((TF_FACTS, None), (jax_facts(0), None))
    choice = cli.choose_backend("auto", p.tf, p.jax)
    assert choice.backend == "tensorflow" and choice.note is None
    assert p.calls == ["tf"]  # JAX is not asked
    p = Probes(NO_TF, (jax_facts(0), None))
    choice = cli.choose_backend("auto", p.tf, p.jax)
    assert choice.backend == "jax" and p.calls == ["tf", "jax"]
    assert choice.jax == (jax_facts(0), None) and choice.tf == NO_TF
    assert "No module named 'tensorflow'" in choice.note
    p = Probes((TF_FACTS, None), (jax_facts(0), None))
    assert cli.choose_backend("jax", p.tf, p.jax).backend == "jax"
    assert p.calls == ["jax"]  # --backend jax never asks TensorFlow


def test_auto_without_either_backend_reports_tensorflows_failure():
    p = Probes(NO_TF, (jax_facts(0, keras=None), None))
    choice = cli.choose_backend("auto", p.tf, p.jax)
    assert choice.backend == "tensorflow" and choice.tf == NO_TF
    assert "neither TensorFlow nor JAX with Keras 3" in choice.note
    assert "Keras does not import" in choice.note
    p = Probes(NO_TF, (None, "JAX probe failed (exit 1): no jax"))
    assert "(JAX: JAX probe failed (exit 1): no jax)" in cli.choose_backend(
        "auto", p.tf, p.jax).note
    p = Probes(NO_TF, (jax_facts(0), None))
    assert cli.choose_backend("tensorflow", p.tf, p.jax).backend == \
        "tensorflow" and p.calls == ["tf"]


def test_plan_when_jax_has_no_keras_3():
    """JAX imports but Keras 3 does not: the jax row fails once and every
    run is a SKIP naming why."""
    why = "JAX did not start: no Keras 3"
    machine = cli.Machine(None, None, NO_SMI, gd.Diagnosis("x", "y"), None,
                          "no GPU", None, "TensorFlow backend only", why,
                          backend="jax", jax_facts=jax_facts(0, keras=None))
    assert not machine.started
    assert machine.backend_row().result == "FAIL"
    checks = cli.plan_for(machine, quick=True)
    assert checks[0].name == "jax"
    runs = [c for c in checks if c.run]
    assert runs and all(c.skip == why for c in runs)


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
        assert cli.main(["--list", "--only", "cpu-m*", "--only",
                         "1gpu-fp32-channels_last-xla_off"],
                        out=lines.append) == 0
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
    # A loaded machine's slow TensorFlow import adds heartbeat lines
    # ("still waiting for TensorFlow to import, 8 s"): not what is checked.
    lines = [l for l in lines if "still waiting for" not in l]
    # No GPU here: the reason once, then each GPU check says "no GPU".
    assert lines[1].startswith("official-bench-doctor: GPU checks skipped: "
                               "no GPU visible to TensorFlow: ")
    reason = lines[1].split("GPU checks skipped: ", 1)[1]
    assert "\n".join(lines).count(reason) == 1
    listed = [l.split()[0] for l in lines[2:]]
    assert listed == ["tensorflow", "gpus", "1gpu-fp32-channels_last-xla_off",
                      "cpu-mirrored-2dev", "cpu-multi_worker-2x1"]
    assert lines[3].endswith("SKIP: no GPU (reason above)")  # gpus, as run
    assert lines[4].endswith("SKIP: no GPU (reason above)")
