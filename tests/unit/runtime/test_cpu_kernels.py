"""runtime.cpu_kernels (runtime/cpu_kernels.py): the decision, made before
TensorFlow loads, the notebook line, and the bfloat16 warning, on flag sets
of machines we do not have."""

import json
import subprocess
import sys

import pytest
from absl import logging

from official_bench.contracts import exit_status
from official_bench.runtime import cpu_kernels as ck
from support.helpers import REPO, TINY_OVERRIDE, child_env, cli, cli_env

AVX2 = frozenset("avx fma avx2".split())  # issue 31's EPYC
BF16 = AVX2 | frozenset("avx512f avx512_vnni avx512_bf16".split())
OLD = frozenset("sse4_2 avx".split())


@pytest.mark.parametrize("requested, num_gpus, env, flags, value", [
    ("onednn", 0, {}, AVX2, "1"),
    ("eigen", 0, {}, BF16, "0"),
    ("onednn", 2, {}, None, "1"),  # asked for: also on a GPU run
    ("auto", 0, {}, AVX2, "1"),  # where TensorFlow leaves it off
    ("auto", 0, {}, BF16, "1"),
    ("auto", 0, {}, OLD, None),  # not measured: TensorFlow's default
    ("auto", 0, {}, None, None),  # no flags (not x86 Linux)
    ("auto", 1, {}, AVX2, None),  # a GPU run keeps TensorFlow's default
    ("auto", 0, {ck.ENV: "0"}, AVX2, None),  # the user's value stays
])
def test_decision(requested, num_gpus, env, flags, value):
    d = ck.decide(requested, num_gpus, env, flags)
    assert (d.requested, d.value) == (requested, value), d.reason


def test_explicit_config_wins_over_the_environment_and_says_so():
    d = ck.decide("eigen", 0, {ck.ENV: "true"}, AVX2)
    assert (d.value, d.overridden) == ("0", "true")
    # the same value in another spelling is no override
    assert ck.decide("onednn", 0, {ck.ENV: "True"}, AVX2).overridden is None
    auto = ck.decide("auto", 0, {ck.ENV: "false"}, AVX2)
    assert auto.value is None and "from the environment" in auto.reason


# apply() in a fresh process: it must set the variable before TensorFlow
# is imported, and import nothing of TensorFlow itself.
APPLY = """
import os, sys
from official_bench.runtime import cpu_kernels as ck
d = ck.apply(sys.argv[1], int(sys.argv[2]), cpuinfo=sys.argv[3])
print(os.environ.get(ck.ENV, "unset"), "tensorflow" in sys.modules)
"""


@pytest.mark.parametrize("args, env, out", [
    (["eigen", "0", "avx fma avx2"], {}, "0 False"),
    (["onednn", "0", "sse4_2"], {ck.ENV: "0"}, "1 False"),
    (["auto", "0", "avx fma avx2"], {}, "1 False"),
    (["auto", "0", "avx fma avx2"], {ck.ENV: "0"}, "0 False"),
    (["auto", "1", "avx fma avx2"], {}, "unset False"),
    (["auto", "0", None], {}, "unset False"),  # no flags line
])
def test_apply_sets_the_variable_without_importing_tensorflow(
        tmp_path, args, env, out):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\n" + (
        f"flags\t\t: {args[2]}\n" if args[2] else ""))
    args = args[:2] + [str(cpuinfo)]
    base = cli_env()
    base.pop(ck.ENV, None)
    p = subprocess.run([sys.executable, "-c", APPLY, *args], cwd=REPO,
                       env=dict(base, **env), capture_output=True,
                       text=True, timeout=60)
    assert p.stdout.split()[-2:] == out.split(), p.stderr


# main() in a fresh process: its status and whether TensorFlow was loaded.
BEFORE_TF = """
import sys
from absl import flags
from official_bench import classifier_trainer
argv = ["classifier_trainer"] + sys.argv[1:]
flags.FLAGS(argv)
status = classifier_trainer.main(argv[:1])
print(status, "tensorflow" in sys.modules)
"""


def _warnings(monkeypatch):
    said = []
    monkeypatch.setattr(logging, "warning",
                        lambda msg, *a: said.append(msg % a))
    monkeypatch.setattr(logging, "info", lambda msg, *a: None)
    return said


def test_bf16_warning_where_the_cores_lack_bf16_units(monkeypatch):
    """The rule, and the line a run logs (flags injected: this machine
    has AVX512_BF16)."""
    line = ck.bf16_warning("bfloat16", 0, AVX2)
    assert line and "25x slower than float32" in line and "0.10 img/s" \
        in line and "issue 31" in line
    assert ck.bf16_warning("bfloat16", 0, BF16) is None
    assert ck.bf16_warning("bfloat16", 0, frozenset({"amx_bf16"})) is None
    assert ck.bf16_warning("float32", 0, AVX2) is None
    assert ck.bf16_warning("bfloat16", 1, AVX2) is None  # GPU run
    assert ck.bf16_warning("bfloat16", 0, None) is None  # unknown CPU
    assert ck.bf16_warning("bfloat16", 0, BF16, onednn=True) is None
    # bf16 units, but Eigen's kernels do not use them
    eigen = ck.bf16_warning("bfloat16", 0, BF16, onednn=False)
    assert eigen and "oneDNN off" in eigen and "runtime.cpu_kernels" in eigen
    assert ck.bf16_warning("float32", 0, BF16, onednn=False) is None
    said = _warnings(monkeypatch)
    monkeypatch.setattr(ck.cpu_features, "read_flags", lambda: AVX2)
    ck.settle("auto", 0, "bfloat16")
    assert line in said


def test_summary_says_bf16_ops_fall_back_to_eigen_without_avx512(
        monkeypatch):
    """oneDNN on, bfloat16 on the CPU: TensorFlow runs bf16 ops on Eigen
    unless the CPU has AVX512F (util.cc); the summary must not say oneDNN
    alone there (this VM: AVX2, no AVX-512)."""
    note = ck.kernels_note("auto", "bfloat16", 0, AVX2, True)
    assert note == (", CPU kernels oneDNN (auto; bf16 ops on Eigen: no "
                    "AVX-512)")
    plain = ", CPU kernels oneDNN (auto)"
    assert ck.kernels_note("auto", "bfloat16", 0, BF16, True) == plain
    assert ck.kernels_note("auto", "float32", 0, AVX2, True) == plain
    assert ck.kernels_note("auto", "bfloat16", 1, AVX2, True) == plain
    assert ck.kernels_note("auto", "bfloat16", 0, None, True) == plain
    # AVX_VNNI without AVX512F: AVX_NE_CONVERT may be there, unlisted
    vnni = AVX2 | frozenset({"avx_vnni"})
    assert ck.kernels_note("auto", "bfloat16", 0, vnni, True) == plain
    assert ck.kernels_note("eigen", "bfloat16", 0, AVX2, False) == \
        ", CPU kernels Eigen (eigen)"
    # the process's own facts, and the start line says it too
    monkeypatch.setattr(ck, "onednn_enabled", lambda: True)
    monkeypatch.setattr(ck.cpu_features, "read_flags", lambda: AVX2)
    assert ck.summary_note(ck.record("auto", "bfloat16", 0)) == note
    # result.json's environment carries the same note (the HTML column's)
    assert ck.record("auto", "bfloat16", 0)["cpu_kernels_note"] == \
        "bf16 ops on Eigen: no AVX-512"
    assert ck.record("auto", "float32", 0)["cpu_kernels_note"] is None
    said = []
    monkeypatch.setattr(logging, "info", lambda fmt, *a: said.append(fmt % a))
    monkeypatch.setattr(ck, "_applied", None)
    ck.settle("auto", 0, "bfloat16")
    assert said and said[0].startswith(
        "official_bench: CPU kernels: oneDNN, bf16 ops on Eigen: no AVX-512 (")


def test_notebook_line_says_what_is_in_effect_and_how_to_change(
        monkeypatch):
    """TensorFlow loaded before official_bench could set the variable,
    with a different answer than the config asks for: one warning line
    naming both and the fix."""
    said = _warnings(monkeypatch)
    monkeypatch.setattr(ck, "_applied", None)
    monkeypatch.setattr(ck, "onednn_enabled", lambda: True)
    monkeypatch.setattr(ck.cpu_features, "read_flags", lambda: BF16)
    assert ck.settle("eigen", 0, "float32") is True
    assert len(said) == 1
    assert "CPU kernels: oneDNN, not the Eigen that runtime.cpu_kernels " \
           "eigen asks for" in said[0]
    assert f"set {ck.ENV}=0 before importing TensorFlow" in said[0]
    assert "restart the kernel" in said[0]
    said.clear()
    assert ck.settle("onednn", 0, "float32") is True
    assert said == []  # what is in effect is what was asked


def test_module_is_tensorflow_free_until_asked():
    p = subprocess.run(
        [sys.executable, "-c", "import sys; from official_bench.runtime "
         "import cpu_kernels; from official_bench.host import cpu_features;"
         " print('tensorflow' in sys.modules)"], cwd=REPO, env=cli_env(),
        capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "False", p.stderr


@pytest.mark.parametrize("requested, user, enabled, name", [
    ("eigen", "1", False, "Eigen"), ("onednn", "0", True, "oneDNN")])
def test_the_setting_reaches_a_fresh_trainer(tmp_path, requested, user,
                                             enabled, name):
    """The CLI in its own process, the user's variable saying the opposite:
    result.json records what was asked and what TensorFlow's IsMklEnabled
    reported in that process, and the summary line says it."""
    p = cli([f"--model_dir={tmp_path}", "--mode=train",
             f"--params_override={TINY_OVERRIDE},"
             f"runtime.cpu_kernels={requested}"],
            env={ck.ENV: user}, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:]
    env = json.loads((tmp_path / "result.json").read_text())["environment"]
    assert (env["cpu_kernels"], env["onednn_enabled"],
            env["tf_enable_onednn_opts"]) == (requested, enabled,
                                              ck.VALUES[requested])
    assert f"CPU kernels {name} ({requested})" in p.stdout
    assert f"sets {ck.ENV}={ck.VALUES[requested]} over {ck.ENV}={user}" \
        in p.stdout


def test_a_bad_value_names_the_choices_before_tensorflow(tmp_path):
    p = subprocess.run([sys.executable, "-c", BEFORE_TF,
                        f"--model_dir={tmp_path}",
                        "--params_override=runtime.cpu_kernels=mkl"],
                       cwd=REPO, env=cli_env(), capture_output=True,
                       text=True, timeout=120)
    assert p.stdout.split() == [str(exit_status.CONFIG), "False"], p.stderr
    assert "runtime.cpu_kernels: unknown cpu_kernels 'mkl'; valid: auto, " \
           "onednn, eigen" in p.stderr


NOTEBOOK = """
import json, sys
import official_bench
from support.helpers import tiny
result = official_bench.run(
    tiny(runtime={"cpu_kernels": sys.argv[1]}), model_dir=sys.argv[2],
    mode="train")
print("RESULT", json.dumps([result.environment["cpu_kernels"],
                            result.environment["onednn_enabled"]]))
"""


def test_official_bench_run_sets_the_kernels_before_tensorflow(tmp_path):
    """A notebook's official_bench.run() in a fresh kernel gets the kernels
    its config asks for (eigen: TensorFlow's default here is oneDNN), with
    no "imported before" warning."""
    env = child_env()
    env.pop(ck.ENV, None)
    p = subprocess.run([sys.executable, "-c", NOTEBOOK, "eigen",
                        str(tmp_path)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    assert json.loads(line[0][7:]) == ["eigen", False], p.stdout
    assert "was imported before" not in p.stderr


def test_nchw_refusal_needs_eigen_in_effect():
    """channels_first on the CPU is refused where TensorFlow says oneDNN is
    off, whatever runtime.cpu_kernels asked (auto keeps the default)."""
    from official_bench import config as C
    cfg = C.load_config(params_override="model.model_params.data_format="
                        "channels_first,runtime.num_gpus=0")
    line = ck.nchw_refusal(cfg, False)
    assert line.startswith("model.model_params.data_format: channels_first "
                           "cannot run on the CPU with Eigen's kernels "
                           "(oneDNN is off: runtime.cpu_kernels auto, "
                           f"{ck.ENV}="), line
    assert "runtime.cpu_kernels to onednn" in line
    assert ck.nchw_refusal(cfg, True) is None
    assert ck.nchw_refusal(cfg, None) is None
    last = C.load_config(params_override="runtime.num_gpus=0")
    assert ck.nchw_refusal(last, False) is None


def test_channels_first_on_default_eigen_is_one_line_exit_2(tmp_path):
    """auto with TF_ENABLE_ONEDNN_OPTS=0: refused once TensorFlow reports
    Eigen, before the model is built; not its traceback at the first step
    (peers 8)."""
    p = cli([f"--model_dir={tmp_path}", "--mode=train",
             f"--params_override={TINY_OVERRIDE},"
             "model.model_params.data_format=channels_first"],
            env={ck.ENV: "0"}, timeout=300)
    assert p.returncode == exit_status.CONFIG, p.stdout[-3000:]
    assert "Traceback" not in p.stdout
    assert p.stdout.rstrip().splitlines()[-1].startswith(
        "error: model.model_params.data_format: channels_first cannot run "
        f"on the CPU with Eigen's kernels (oneDNN is off: runtime.cpu_kernels"
        f" auto, {ck.ENV}=0)"), p.stdout[-3000:]
