"""runtime.xla_flags (jax_backend/xla_options.py): checked for real by XLA
in a child Python (this JAX, 0.10.2 here); a flag XLA does not know ends
the trainer with one line and exit 2, not XLA's fatal abort; flags that
pass reach the run's JAX (its HLO dump appears where they ask) and
result.json's environment; the config's flags come after XLA_FLAGS' own
and win."""

import json
import os
import subprocess
import sys

import pytest

from official_bench.contracts import exit_status
from official_bench.contracts.trainer_command import trainer_argv
from official_bench.jax_backend import xla_options
from support.helpers import (
    FAST_COMPILE,
    REPO,
    cli_env,
    keras3_child,
    xla_flags,
)

# The four options issue 47 names, and one the CPU backend uses.
ISSUE_FLAGS = ["--xla_gpu_autotune_level=0",
               "--xla_gpu_enable_command_buffer=",
               "--xla_gpu_use_runtime_fusion=true",
               "--xla_gpu_experimental_enable_conv_fusion=true",
               "--xla_cpu_enable_fast_math=false"]


def test_xla_accepts_the_issue_flags_and_names_a_value_it_cannot_read():
    xla_options.check(" ".join(ISSUE_FLAGS), os.environ)
    with pytest.raises(xla_options.XlaFlagsError) as e:
        xla_options.check("--xla_cpu_enable_fast_math=false "
                          "--xla_gpu_autotune_level=fast", os.environ)
    text = str(e.value)
    assert "\n" not in text
    assert text.startswith("runtime.xla_flags: XLA cannot read 'fast' as "
                           "the value of --xla_gpu_autotune_level"), text


def test_the_trainer_names_an_unknown_flag_in_one_line(tmp_path):
    """XLA itself would end the process with a fatal log line and a page
    of usage; the trainer stops before its JAX starts."""
    override = ("runtime.backend=jax,runtime.num_gpus=0,"
                "runtime.distribution_strategy=one_device,"
                "model.name=resnet_cifar,model.model_params.depth=8,"
                "train_dataset.image_size=8,train_dataset.num_classes=10,"
                "train.steps=1,evaluation.skip_eval=true,"
                "runtime.xla_flags=[--xla_cpu_enable_fast_math=false,"
                "--xla_no_such_option=1]")
    p = subprocess.run(
        trainer_argv(sys.executable, mode="train",
                     model_dir=str(tmp_path / "m"), params_override=override),
        cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == exit_status.CONFIG, p.stderr[-2000:]
    last = p.stderr.strip().splitlines()[-1]
    # (XLA_FLAGS: the tests' own first, tests/conftest.py)
    flags = xla_flags("--xla_cpu_enable_fast_math=false",
                      "--xla_no_such_option=1")
    assert last == (
        "error: runtime.xla_flags: XLA does not know --xla_no_such_option=1 "
        f"(XLA_FLAGS '{flags}'); fix or remove it"), last
    assert "Unknown flag" not in p.stderr and "usage:" not in p.stderr
    assert not (tmp_path / "m" / "result.json").exists()


def flags_reach_jax():
    """In the child: devices.start with runtime.xla_flags asking for an
    HLO dump of one module; what JAX dumped and what result.json says."""
    import jax

    from official_bench import config as C
    from official_bench.jax_backend import devices, environment, keras3
    dump_dir = os.environ["OB_TEST_DUMP_DIR"]
    cfg = C.load_config(params_override=(
        "runtime.backend=jax,runtime.num_gpus=0,runtime.xla_flags=["
        f"--xla_dump_to={dump_dir},--xla_dump_hlo_as_text,"
        "--xla_dump_hlo_module_re=.*probe_me.*]"))
    run = devices.start(cfg.runtime)

    def probe_me(x):
        return x * 2 + 1
    jax.jit(probe_me)(jax.numpy.ones(3)).block_until_ready()
    jax.jit(lambda x: x - 1)(jax.numpy.ones(3)).block_until_ready()
    env = environment.collect(run, environment.versions(run), "off", 1,
                              "float32", 1)
    print(json.dumps({"dumped": sorted(os.listdir(dump_dir)),
                      "in_effect": keras3.xla_flags_in_effect(),
                      "recorded": env["xla_flags"]}))


def test_the_flags_reach_the_runs_jax_and_result_json(tmp_path,
                                                      monkeypatch):
    monkeypatch.setenv("OB_TEST_DUMP_DIR", str(tmp_path / "hlo"))
    r = keras3_child(__file__, "flags_reach_jax")
    after = [f for f in r["dumped"] if f.endswith("after_optimizations.txt")]
    # Only the module the regex names has its optimised HLO dumped; the
    # lambda compiled too (JAX names its module file) but has none.
    assert after and all("probe_me" in f for f in after), r["dumped"]
    assert any("lambda" in f for f in r["dumped"])
    # The tests' flag and keras3_child's device count first, the config's
    # flags after them.
    assert r["in_effect"] == [
        FAST_COMPILE, "--xla_force_host_platform_device_count=1",
        f"--xla_dump_to={tmp_path / 'hlo'}", "--xla_dump_hlo_as_text",
        "--xla_dump_hlo_module_re=.*probe_me.*"]
    assert r["recorded"] == r["in_effect"]


def test_config_flags_go_after_the_environments_and_are_checked(
        monkeypatch):
    checked = []
    monkeypatch.setattr(xla_options, "check",
                        lambda value, environ: checked.append(value))
    environ = {"XLA_FLAGS": "--xla_dump_to=/a  --xla_dump_hlo_as_text"}
    xla_options.apply(environ, ["--xla_dump_to=/b"], started=False)
    assert environ["XLA_FLAGS"] == checked[0] == \
        "--xla_dump_to=/a --xla_dump_hlo_as_text --xla_dump_to=/b"
    untouched = {"XLA_FLAGS": "--xla_x=1"}
    xla_options.apply(untouched, [], started=False)
    assert untouched == {"XLA_FLAGS": "--xla_x=1"} and len(checked) == 1


def test_flags_cannot_change_once_jax_started(monkeypatch):
    monkeypatch.setattr(xla_options, "check", lambda *a: pytest.fail(
        "checked although JAX had started"))
    environ = {"XLA_FLAGS": "--xla_a=1 --xla_b=2"}
    xla_options.apply(environ, ["--xla_b=2"], started=True)  # already on
    with pytest.raises(xla_options.XlaFlagsError,
                       match=r"JAX already started in this process with "
                             r"XLA_FLAGS '--xla_a=1 --xla_b=2'; --xla_c=3 "
                             r"cannot apply any more"):
        xla_options.apply(environ, ["--xla_b=2", "--xla_c=3"], started=True)
    assert environ == {"XLA_FLAGS": "--xla_a=1 --xla_b=2"}
