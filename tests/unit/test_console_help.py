"""Every console script in setup.cfg answers --help (issue 28 §5): exit 0,
its flags listed, no line wider than 80 columns even on a wide terminal,
and TensorFlow not imported to say so (help is instant); the GPU speed
benchmarks' help opens with their docstring's whole first paragraph."""

import configparser
import os
import subprocess
import sys

import pytest

from support.helpers import REPO, cli_env

# A few flags each script must list; every console script must be here.
KNOWN_FLAGS = {
    "official-bench-train": [
        "--mode", "--model_type", "--dataset", "--model_dir", "--data_dir",
        "--config_file", "--params_override", "--log_steps", "--num_gpus",
        "--profile_steps", "--[no]run_eagerly"],
    "official-bench-extract": [
        "--log_dir", "--output_dir", "--warmup_batches", "--train_batches",
        "--method", "--compare", "--no_plot"],
    "official-bench-build-records": [
        "--output_dir", "--input_dir", "--layout", "--train_shards",
        "--validation_shards", "--num_workers", "--verify"],
    "official-bench-allreduce": [
        "--config_file", "--params_override", "--model_dir", "--sizes",
        "--dtypes", "--iters", "--warmup", "--compute_wait_cycles"],
    "official-bench-doctor": [
        "--workdir", "--output", "--quick", "--only", "--list", "--timeout"],
    "official-bench-zmq-producer": [
        "--connect", "--bind", "--synthetic", "--folder", "--records",
        "--python_source", "--batch_size", "--dtype", "--max_batches"],
    "official-bench-input-bench": [
        "--config_file", "--params_override", "--model_type", "--dataset",
        "--seconds"],
    "official-bench-compare": [
        "--a", "--b", "--a-override", "--b-override", "--a-config",
        "--b-config", "--config", "--pairs", "--json"],
    "official-bench-history": [
        "--db", "--case", "--plot", "--import", "--json"],
    "official-bench-data-service": [
        "--dispatcher", "--worker", "--port", "--dispatcher_address",
        "--worker_address"],
    "official-bench-k8s": [
        "--nodes", "--gpus", "--image", "--kind", "--name", "--namespace",
        "--batch", "--dtype", "--test-num", "--backend", "--port",
        "--logs-pvc", "--hold", "--data-pvc", "--data-dir", "--secret"],
}
WIDTH = 80


def console_scripts():
    """{script name: module} from setup.cfg's entry points."""
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(REPO, "setup.cfg"))
    scripts = {}
    for line in cfg["options.entry_points"]["console_scripts"].splitlines():
        if line.strip():
            name, target = (part.strip() for part in line.split("="))
            scripts[name] = target.split(":")[0]
    return scripts


def test_every_console_script_has_known_flags():
    assert sorted(console_scripts()) == sorted(KNOWN_FLAGS)


def imported_modules(importtime_stderr):
    """Module names from `python -X importtime` lines on stderr."""
    names = set()
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


@pytest.mark.parametrize("script", sorted(KNOWN_FLAGS))
def test_help_lists_flags_fits_80_columns_without_tensorflow(script):
    module = console_scripts()[script]
    # A wide terminal: argparse and absl would wrap at 200 columns.
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", module, "--help"],
        cwd=REPO, env=cli_env({"COLUMNS": "200"}), capture_output=True,
        text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    missing = [f for f in KNOWN_FLAGS[script] if f not in p.stdout]
    assert not missing, f"{script} --help lacks {missing}:\n{p.stdout}"
    wide = [line for line in p.stdout.splitlines() if len(line) > WIDTH]
    assert not wide, f"{script} --help lines over {WIDTH} columns:\n" + \
        "\n".join(wide)
    bare = options_without_help(p.stdout)
    assert not bare, f"{script} --help: options with no help text: {bare}"
    tf = sorted(m for m in imported_modules(p.stderr)
                if m == "tensorflow" or m.startswith("tensorflow."))
    assert not tf, f"{script} --help imported {tf[:3]}"


def options_without_help(text):
    """argparse's option lines ("  --flag X") with no help after them on
    the line or on the next, deeper-indented one (absl's help, which has
    no "options:" section, is skipped)."""
    lines, bare, inside = text.splitlines(), [], False
    for i, line in enumerate(lines):
        if line in ("options:", "optional arguments:"):
            inside = True
        elif inside and line and not line.startswith(" "):
            inside = False
        elif inside and line.startswith("  -"):
            following = lines[i + 1] if i + 1 < len(lines) else ""
            has_help = "  " in line.strip() or (
                following.startswith("    ")
                and not following.lstrip().startswith("-"))
            if not has_help:
                bare.append(line.strip())
    return bare


def test_options_without_help_finds_a_bare_option():
    text = ("usage: x\n\noptions:\n  -h, --help  show this\n"
            "  --seed SEED\n  --long_option_name LONG_OPTION_NAME\n"
            "                        what it does\n  --bare\n\nepilog\n"
            "  --not_an_option_here\n")
    assert options_without_help(text) == ["--seed SEED", "--bare"]


# Issue 40 item 4: a flag error of every entry point is one line on stderr
# naming the flag (and the closest valid flag or value), exit 2
# (docs/exit_status.md, CONFIG), before TensorFlow loads.
# {script: [(argv, words the line must hold), ...]}: an unknown flag, a bad
# value; required flags are given so the typo is what is refused.
FLAG_ERRORS = {
    "official-bench-train": [
        (["--num_gpu=1"], ["--num_gpu ", "--num_gpus?"]),
        (["--mode=trian"], ["--mode=trian", "did you mean train?"])],
    "official-bench-extract": [
        (["--log_dri", "x"], ["--log_dri ", "--log_dir?"]),
        (["--method", "medain"], ["--method", "did you mean mean?"])],
    "official-bench-compare": [
        (["--a", "x", "--b", "y", "--windw", "auto"],
         ["--windw", "--window?"]),
        (["--a", "x", "--b", "y", "--window", "auot"],
         ["--window", "did you mean auto?"])],
    "official-bench-history": [
        (["--db", "x", "--plto", "p.png"], ["--plto", "--plot?"]),
        (["--db", "x", "--train_batches", "abc"], ["--train_batches", "abc"])],
    "official-bench-build-records": [
        (["--output_dir", "x", "--num_workrs", "2"],
         ["--num_workrs", "--num_workers?"]),
        (["--output_dir", "x", "--layout", "imagenett"],
         ["--layout", "did you mean imagenet?"])],
    "official-bench-allreduce": [
        (["--sizess=1M"], ["--sizess", "--sizes?"]),
        (["--iters=many"], ["--iters=many", "not an integer"])],
    "official-bench-doctor": [
        (["--quik"], ["--quik", "--quick?"]),
        (["--backend", "jaxx"], ["--backend", "did you mean jax?"])],
    "official-bench-zmq-producer": [
        (["--connect", "x", "--synthetic", "--batch_size", "2",
          "--max_batchs", "3"], ["--max_batchs", "--max_batches?"]),
        (["--connect", "x", "--synthetic", "--batch_size", "2", "--dtype",
          "flaot32"], ["--dtype", "did you mean float32?"])],
    "official-bench-input-bench": [
        (["--modeltype", "resnet"], ["--modeltype", "--model_type?"]),
        (["--seconds", "abc"], ["--seconds", "abc"])],
    "official-bench-data-service": [
        (["--dispatcher", "--port", "1", "--worker_adress", "h"],
         ["--worker_adress", "--worker_address?"]),
        (["--dispatcher", "--port", "many"], ["--port", "many"])],
    "official-bench-k8s": [
        (["--nodes", "1", "--gpus", "1", "--image", "i", "--namspace", "n"],
         ["--namspace", "--namespace?"]),
        (["--nodes", "1", "--gpus", "1", "--image", "i", "--kind", "jobb"],
         ["--kind", "did you mean job?"])],
}
# The same errors from the other entry points: the run scripts' parser and
# the two root files DLPerf's scripts call.
OTHER_ENTRY_POINTS = {
    "launch": ([sys.executable, "-m", "official_bench.launch", "single"], [
        (["--test_nu", "3"], ["--test_nu ", "--test-num?"]),
        # settings.py checks the knob's value itself, listing them all.
        (["--dtype", "fp31"], ["fp31", "fp32"])]),
    "classifier_trainer.py": ([sys.executable, "classifier_trainer.py"], [
        (["--num_gpus=abc"], ["--num_gpus=abc", "not an integer"])]),
    "extract_tensorflow_logs.py": (
        [sys.executable, "extract_tensorflow_logs.py"], [
            (["--log_dri", "x"], ["--log_dri ", "--log_dir?"])]),
}


def flag_error_cases():
    scripts = console_scripts()
    for script, cases in sorted(FLAG_ERRORS.items()):
        if script not in scripts:  # a case ahead of its setup.cfg line
            continue
        command = [sys.executable, "-X", "importtime", "-m", scripts[script]]
        for argv, words in cases:
            yield pytest.param(command + argv, words, id=" ".join(
                [script] + argv))
    for name, (command, cases) in sorted(OTHER_ENTRY_POINTS.items()):
        for argv, words in cases:
            yield pytest.param(command + argv, words,
                               id=" ".join([name] + argv))


def test_every_console_script_has_flag_error_cases():
    assert not set(console_scripts()) - set(FLAG_ERRORS)


@pytest.mark.parametrize("command,words", list(flag_error_cases()))
def test_flag_error_is_one_line_exit_2(command, words):
    p = subprocess.run(command, cwd=REPO, env=cli_env(),
                       capture_output=True, text=True, timeout=120)
    lines = [line for line in p.stderr.splitlines()
             if not line.startswith("import time:")]
    assert p.returncode == 2, p.stdout + p.stderr[-3000:]
    assert len(lines) == 1, lines
    missing = [w for w in words if w not in lines[0]]
    assert not missing, f"{lines[0]!r} lacks {missing}"
    if "importtime" in command:
        tf = [m for m in imported_modules(p.stderr) if m == "tensorflow"]
        assert not tf, f"{command} imported TensorFlow to refuse a flag"


@pytest.mark.parametrize("script", ["bn_traffic", "jax_profile",
                                    "jax_speed_ab", "jax_step_ab",
                                    "jax_vs_bare"])
def test_the_speed_benchmarks_help_opens_with_their_whole_first_sentence(
        script):
    # argparse's description is the docstring's first paragraph, not its
    # first line cut mid-sentence
    p = subprocess.run([sys.executable, os.path.join(
        REPO, "benchmarks", f"{script}.py"), "--help"], env=cli_env(),
        capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    paragraphs = p.stdout.split("\n\n")
    assert paragraphs[1].strip().endswith("."), paragraphs[1]


def _python_files():
    """The .py files of the package, benchmarks/, scripts/ and the root."""
    paths = [os.path.join(REPO, name) for name in sorted(os.listdir(REPO))
             if name.endswith(".py")]
    for top in ("official_bench", "benchmarks", "scripts"):
        for folder, dirs, files in os.walk(os.path.join(REPO, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            paths += [os.path.join(folder, f) for f in sorted(files)
                      if f.endswith(".py")]
    return paths


def options_lacking_help(path):
    """"path:line --option" for each add_argument call in `path` with an
    option string ("-x", "--x") and no help= keyword."""
    import ast
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    rel = os.path.relpath(path, REPO)
    bare = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant)
                 and isinstance(a.value, str) and a.value.startswith("-")]
        # help= named, or possibly inside **kwargs: counted as given
        if flags and not any(k.arg in ("help", None) for k in node.keywords):
            bare.append(f"{rel}:{node.lineno} {flags[-1]}")
    return bare


def test_every_command_line_option_has_help():
    # Static, so it covers the benchmarks and scripts too, whose --help
    # no test runs (some import JAX or TensorFlow first).
    files = _python_files()
    assert any(p.endswith(os.path.join("benchmarks", "jax_step_ab.py"))
               for p in files)
    bare = [entry for path in files for entry in options_lacking_help(path)]
    assert not bare, "options with no help= (say what each does and its " \
        "default):\n" + "\n".join(bare)


def test_options_lacking_help_finds_a_bare_option(tmp_path):
    script = tmp_path / "s.py"
    script.write_text(
        "p.add_argument('out')\n"
        "p.add_argument('--told', help='x')\n"
        "p.add_argument('-n', '--bare', type=int)\n"
        "p.add_argument('--spread', **kwargs)\n"
        "p.add_argument('--hidden', help=SUPPRESS)\n")
    rel = os.path.relpath(str(script), REPO)
    assert options_lacking_help(str(script)) == [f"{rel}:3 --bare"]
