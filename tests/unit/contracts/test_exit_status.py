"""One exit-status table: the module, docs/exit_status.md's copy, the shell
library's literals, the entry points' main() functions, and a real case for
each documented status (most of them in the test files that already run that
case; PRODUCERS names them and checks that they assert the module's
constant)."""

import ast
import os
import re
import signal
import subprocess
import sys

import pytest

from official_bench.contracts import exit_status as es
from support.helpers import REPO
from support.launch_cli import script

# Each documented status -> the tests that produce it with a real process
# and assert it against this module (file, function, constant to mention).
PRODUCERS = {
    es.OK: [("unit/test_classifier_trainer.py",
             "test_dlperf_gpu_yaml_runs_on_cpu_through_cli",
             "exit_status.OK")],
    es.FAILED: [("unit/training/test_nan_guard.py",
                 "test_cli_exits_1_with_the_step",
                 "exit_status.FAILED"),
                ("unit/launch/test_launch_cli.py",
                 "test_run_timeout_escalates_to_sigkill",
                 "exit_status.FAILED")],
    es.CONFIG: [("unit/test_classifier_trainer.py",
                 "test_bad_config_exits_2_naming_the_key",
                 "exit_status.CONFIG"),
                ("unit/contracts/test_tf_config.py",
                 "test_trainer_exits_2_with_one_error_line",
                 "exit_status.CONFIG")],
    es.CLUSTER: [("system/test_multiworker.py",
                  "test_own_port_in_use_is_reported",
                  "exit_status.CLUSTER"),
                 ("unit/launch/test_launch_cli.py",
                  "test_tf_config_wins_and_is_logged",
                  "exit_status.CLUSTER"),
                 ("unit/contracts/test_tf_config.py",
                  "test_launcher_exits_3_with_one_error_line",
                  "exit_status.CLUSTER")],
    es.PEER_LOST: [("system/test_multiworker.py",
                    "test_peer_killed_mid_run_ends_the_survivor",
                    "exit_status.PEER_LOST"),
                   ("system/test_parameter_server.py",
                    "test_ps_killed_mid_run_no_task_exits_0",
                    "exit_status.PEER_LOST")],
    es.NOT_WRITABLE: [("unit/test_disk_full.py",
                       "test_trainer_result_on_full_disk",
                       "exit_status.NOT_WRITABLE"),
                      ("unit/launch/test_launch_disk_full.py",
                       "test_launcher_log_on_full_disk_stops_sweep",
                       "exit_status.NOT_WRITABLE")],
    es.LOGS_IN_USE: [("unit/launch/test_log_claims.py",
                      "test_second_launcher_on_same_case_stops",
                      "exit_status.LOGS_IN_USE")],
    es.SLOWER: [("unit/judge/test_history.py",
                 "test_slow_down_exits_with_slower",
                 "exit_status.SLOWER")],
    es.BARRIER_TIMEOUT: [("unit/launch/test_launch_cli.py",
                          "test_peer_that_never_arrives",
                          "exit_status.BARRIER_TIMEOUT")],
    es.TIMEOUT: [("unit/contracts/test_exit_status.py",
                  "test_run_over_run_timeout_that_obeys_sigterm_is_124",
                  "es.TIMEOUT")],
    es.INTERRUPTED: [("system/test_stop_signals.py",
                      "test_one_device_run_stops_with_128_plus_signal",
                      "exit_status.INTERRUPTED")],
    es.KILLED: [("system/test_multiworker.py",
                 "test_missing_worker_is_a_clear_timeout",
                 "exit_status.KILLED"),
                ("unit/launch/test_launch_cli.py",
                 "test_run_timeout_escalates_to_sigkill",
                 "exit_status.KILLED")],
    es.TERMINATED: [("system/test_stop_signals.py",
                     "test_one_device_run_stops_with_128_plus_signal",
                     "exit_status.TERMINATED"),
                    ("unit/launch/test_launch_cli.py",
                     "test_interrupted_launcher_stops_its_trainer",
                     "exit_status.TERMINATED")],
}

# Entry points whose main() returns the process's exit status.
ENTRY_POINTS = [
    "official_bench/classifier_trainer.py",
    "official_bench/allreduce/bench.py",
    "official_bench/data/input_bench.py",
    "official_bench/launch/__main__.py",
    "official_bench/extract/extractor.py",
    "official_bench/judge/compare.py",
    "official_bench/judge/history.py",
    "official_bench/doctor/cli.py",
    "official_bench/data/feeds/zmq_producer.py",
    "official_bench/data/build/build_records.py",
    "official_bench/doctor/tfprobe.py",
    "official_bench/runtime/watchdog.py",
]


def test_table_is_consistent():
    codes = [s.code for s in es.TABLE]
    assert len(codes) == len(set(codes))
    assert codes == sorted(codes)
    for row in es.TABLE:
        assert getattr(es, row.name) == row.code, row
        assert row.meaning
    assert es.TERMINATED == 128 + signal.SIGTERM == 143
    assert es.INTERRUPTED == 130 and es.KILLED == 137
    assert len({es.CONFIG, es.CLUSTER, es.PEER_LOST, es.FAILED}) == 4


def test_signal_helpers():
    assert es.by_signal(signal.SIGTERM) == es.TERMINATED
    assert es.signal_number(-9) == 9 and es.signal_number(137) == 9
    assert es.signal_number(2) is None and es.signal_number(None) is None
    assert es.signal_number(128) is None and es.signal_number(250) is None
    assert es.lookup(-15) is es.lookup(143) and es.lookup(143).name == \
        "TERMINATED"
    assert es.lookup(8) is None


def test_docs_table_is_the_modules():
    with open(os.path.join(REPO, "docs", "exit_status.md"),
              encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- exit-status table: generated, do not edit by hand "
                  r"-->\n(.*?)<!-- end exit-status table -->", text, re.S)
    assert m, "docs/exit_status.md lost its exit-status table markers"
    assert m.group(1) == es.markdown_table(), (
        "docs/exit_status.md's table differs from official_bench/contracts/"
        "exit_status.py: paste `python -m official_bench.contracts."
        "exit_status` between the markers")
    out = subprocess.run([sys.executable, "-m",
                          "official_bench.contracts.exit_status"],
                         cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout == es.markdown_table()


def test_shell_codes_are_the_modules():
    """Every `return N` / `exit N` in the shell scripts is tagged with the
    module's constant and has its value."""
    paths = [os.path.join(REPO, "scripts", "lib", "launch.sh")] + [
        os.path.join(REPO, f) for f in sorted(os.listdir(REPO))
        if f.endswith(".sh")]
    found = 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                m = re.search(r"\b(?:return|exit) (\d+)\b", line)
                if not m or line.lstrip().startswith("#"):
                    continue
                tag = re.search(r"# exit_status\.([A-Z_]+)", line)
                assert tag, f"{path}:{n}: untagged exit code: {line!r}"
                assert getattr(es, tag.group(1)) == int(m.group(1)), \
                    f"{path}:{n}: {line!r}"
                found += 1
    assert found >= 1  # launch.sh's "no python3" exit


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_entry_points_return_no_literal_status(path):
    """main() takes its statuses from the module, never a number."""
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    mains = [n for n in tree.body
             if isinstance(n, ast.FunctionDef) and n.name == "main"]
    assert mains, path
    literal = [n.lineno for n in ast.walk(mains[0])
               if isinstance(n, ast.Return)
               and isinstance(n.value, (ast.Constant, ast.BinOp))]
    assert not literal, f"{path}: main() returns a literal at {literal}"


def _function_source(filename, func):
    with open(os.path.join(REPO, "tests", filename), encoding="utf-8") as f:
        text = f.read()
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == func:
            return ast.get_source_segment(text, node)
    raise AssertionError(f"tests/{filename}: no test {func}")


def test_every_documented_status_has_a_producing_test():
    assert set(PRODUCERS) == {s.code for s in es.TABLE}
    for code, cases in PRODUCERS.items():
        for filename, func, constant in cases:
            src = _function_source(filename, func)
            assert constant in src, (code, filename, func)


def _obedient_trainer(tmp_path):
    """A 'python' that sleeps and dies of SIGTERM, as the trainer does."""
    path = tmp_path / "obedient.sh"
    path.write_text("#!/bin/bash\necho 'obedient trainer started'\n"
                    "exec sleep 60\n")
    path.chmod(0o755)
    return str(path)


def test_run_over_run_timeout_that_obeys_sigterm_is_124(tmp_path):
    out = script("single", tmp_path, "4", "fp32", "1", "--python",
                 _obedient_trainer(tmp_path), DEVICE="cpu", RUN_TIMEOUT=1,
                 KILL_AFTER=5, PYTHON_CHECK_TIMEOUT=0)
    assert out.returncode == es.FAILED, (out.stdout, out.stderr)
    assert f"FAILED (exit {es.TIMEOUT}: timed out (RUN_TIMEOUT), stopped " \
           "with SIGTERM)" in out.stdout, out.stdout
    assert "still running after RUN_TIMEOUT=1 s: sent SIGTERM" in out.stdout


def test_describe_names_a_status_by_its_row():
    assert es.describe(es.PEER_LOST) == \
        "exit 4: a peer task went away mid-run"
    assert es.describe(es.FAILED) == "exit 1"  # a row without short words
    assert es.describe(99) == "exit 99"  # not a row
    assert es.describe(None) == "did not start"


def test_extractor_help_names_every_status_its_main_returns():
    """The extractor's --help epilog comes from the table and lists each
    `exit_status.NAME` that its main() returns."""
    from official_bench.extract import extractor
    tree = ast.parse(open(extractor.__file__, encoding="utf-8").read())
    main = next(n for n in tree.body
                if isinstance(n, ast.FunctionDef) and n.name == "main")
    returned = {getattr(es, n.value.attr) for n in ast.walk(main)
                if isinstance(n, ast.Return)
                and isinstance(n.value, ast.Attribute)
                and getattr(n.value.value, "id", "") == "exit_status"}
    epilog = extractor.build_parser().epilog
    m = re.match(r"Exit status: (.*?)\.", epilog)
    assert m, epilog
    named = {int(part.split()[0]) for part in m.group(1).split(", ")}
    assert returned and named == returned, (named, returned)


def test_help_text_lists_rows_of_the_table_in_its_order():
    assert es.help_text({es.CONFIG: "bad usage", es.OK: "success"}) == \
        "Exit status: 0 success, 2 bad usage."
    assert es.help_text({es.SIGNALS: "a signal", es.TERMINATED: "SIGTERM",
                         es.FAILED: "failed"}) == \
        "Exit status: 1 failed, 143 SIGTERM, 128+N a signal."
    with pytest.raises(KeyError):
        es.help_text({99: "not a row"})


def _console_modules():
    """The modules of setup.cfg's console scripts."""
    import configparser
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(REPO, "setup.cfg"))
    lines = cfg["options.entry_points"]["console_scripts"].splitlines()
    return sorted(line.split("=")[1].strip().split(":")[0]
                  for line in lines if "=" in line)


CONSOLE_MODULES = _console_modules()
# "exit 2", "Exit status: 0 ...", "exits 1": a status written by hand
# ("128+signal", the shell's convention, is not a number).
_HAND_WRITTEN = re.compile(
    r"(?i)\bexit(?:s| status(?:es)?)?:?\s+\d+\b(?!\+)")
_STATUS_NAMES = {s.name: s.code for s in es.TABLE}


def _source(module):
    return open(os.path.join(REPO, *module.split(".")) + ".py",
                encoding="utf-8").read()


def _named_statuses(tree):
    """The statuses a module names: exit_status.X, es.X, an imported X;
    by_signal(...) stands for the 128+N row."""
    named = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and \
                getattr(node.value, "id", "") in ("exit_status", "es"):
            if node.attr in _STATUS_NAMES:
                named.add(_STATUS_NAMES[node.attr])
            elif node.attr == "by_signal":
                named.add(es.SIGNALS)
        elif isinstance(node, ast.ImportFrom) and \
                (node.module or "").endswith("exit_status"):
            named |= {_STATUS_NAMES[a.name] for a in node.names
                      if a.name in _STATUS_NAMES}
    return named


def test_console_scripts_write_no_status_by_hand():
    """No docstring or string of a console script's module writes an exit
    status as a number: lists come from the table (help_text), prose
    names the constant."""
    assert len(CONSOLE_MODULES) >= 11, CONSOLE_MODULES
    found = []
    for module in CONSOLE_MODULES:
        for node in ast.walk(ast.parse(_source(module))):
            if isinstance(node, ast.Constant) and \
                    isinstance(node.value, str):
                found += [f"{module}:{node.lineno}: {m.group(0)!r}"
                          for m in _HAND_WRITTEN.finditer(node.value)]
    assert not found, found


def _help(module):
    return subprocess.Popen(
        [sys.executable, "-m", module, "--help"], cwd=REPO,
        env=dict(os.environ, COLUMNS="80"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def test_console_scripts_help_lists_what_they_return():
    """A console script that lists exit statuses lists EXIT_STATUSES through
    help_text, once, and EXIT_STATUSES holds every status its module names
    (its 128+N row every signal's)."""
    import importlib
    listing = [m for m in CONSOLE_MODULES
               if hasattr(importlib.import_module(m), "EXIT_STATUSES")]
    # docs/exit_status.md: each console script of setup.cfg lists them.
    assert sorted(listing) == sorted(CONSOLE_MODULES), \
        sorted(set(CONSOLE_MODULES) - set(listing))
    procs = {m: _help(m) for m in listing}
    for module, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == es.OK, (module, err)
        statuses = importlib.import_module(module).EXIT_STATUSES
        text = " ".join(es.help_text(statuses).split())
        assert text in " ".join(out.split()), (module, text, out)
        assert out.count("xit status") == 1, (module, out)
        named = _named_statuses(ast.parse(_source(module)))
        if es.SIGNALS in statuses:  # 128+N stands for 130, 143, ...
            named = {c for c in named if c == es.SIGNALS
                     or c <= es.SIGNAL_BASE}
        assert named and named <= set(statuses), (module, named, statuses)


def test_launcher_help_names_only_statuses_of_the_table(tmp_path):
    """The run scripts' --help lists exit statuses (launch/settings.py);
    each number it names is one of the table's."""
    out = script("single", tmp_path, "--help")
    assert out.returncode == es.OK, out.stderr
    m = re.search(r"exit status:(.*?)\n\S", out.stdout, re.S)
    assert m, out.stdout[-2000:]
    named = {int(n) for n in re.findall(r"\b\d+\b", m.group(1))}
    assert named and named <= {s.code for s in es.TABLE}, named
