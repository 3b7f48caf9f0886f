"""scripts/lib/launch.sh: a PYTHON that cannot be run is one line naming
it, exit 2 (it was the shell's 'No such file or directory', exit 127)."""

import os
import subprocess
import sys

import pytest

from official_bench.contracts import exit_status as es

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))


@pytest.mark.parametrize("python", ["/nonexistent/bin/python", "/",
                                    "python3.nonexistent"])
def test_a_python_that_cannot_run_is_one_line_exit_2(tmp_path, python):
    env = {**os.environ, "PYTHON": python, "LOG_DIR": str(tmp_path)}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        ["bash", os.path.join(REPO, "run_single_node.sh"), "8", "fp32", "1",
         "--dry-run"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == es.CONFIG, done
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: PYTHON='{python}' is not an executable Python interpreter "
        "(missing, a directory or not executable): set PYTHON= to one, or "
        f"unset it to use {REPO}/.venv (`make bench` creates it)"]


def test_a_python_that_cannot_run_names_the_activated_venv_instead(
        tmp_path):
    """With a venv activated, unsetting PYTHON gives that venv's python,
    not the repository's .venv: the line says so."""
    active = tmp_path / "active" / "bin"
    active.mkdir(parents=True)
    (active / "python").symlink_to(sys.executable)
    env = {**os.environ, "PYTHON": "/nonexistent/bin/python",
           "VIRTUAL_ENV": str(tmp_path / "active"), "LOG_DIR": str(tmp_path)}
    done = subprocess.run(
        ["bash", os.path.join(REPO, "run_single_node.sh"), "8", "--dry-run"],
        env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == es.CONFIG, done
    assert done.stderr.splitlines() == [
        "error: PYTHON='/nonexistent/bin/python' is not an executable Python "
        "interpreter (missing, a directory or not executable): set PYTHON= "
        f"to one, or unset it to use {active}/python (the activated venv, "
        "VIRTUAL_ENV)"]
