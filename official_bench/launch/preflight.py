"""Can the trainer's Python import the trainer? Asked once, before any run.
(And can the output folders be made: `not_a_directory`.)

A fresh clone's `python3` usually has none of the trainer's packages; without
this check every run would fail the same way after the log tree was made
(`ModuleNotFoundError: No module named 'absl'`). The question is asked in a
subprocess of the very interpreter and environment the trainer will get,
first by locating the modules (fast: a clear list of what is missing), then
by importing official_bench.trainer (TensorFlow's import takes seconds, so
there is a timeout). Standard library only: the launcher must be able to say
this even when its own Python lacks PyYAML (see missing_here).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
from typing import Dict, List, Optional, Sequence

from official_bench.host import write_errors

# What the trainer's Python must import, per runtime.backend
# (config/backends.py): import name -> pip package, for the messages.
BACKEND_MODULES = {
    "tensorflow": {"tensorflow": "tensorflow", "tf_keras": "tf-keras",
                   "absl": "absl-py", "yaml": "pyyaml"},
    "jax": {"jax": "jax", "keras": "keras", "absl": "absl-py",
            "yaml": "pyyaml"},
}
TRAINER_MODULES = BACKEND_MODULES["tensorflow"]
HOROVOD_MODULES = {"horovod": "horovod"}
TRAINER_IMPORT = "official_bench.trainer"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
MARK = "OB_PREFLIGHT "

# Runs in the checked interpreter: argv[1] comma-separated module names,
# argv[2] the module to import when none is missing ("-": none). Written for
# any Python 3, so that an old interpreter still answers.
_CHECK = r"""
import json, sys
from importlib.util import find_spec
missing = []
for name in sys.argv[1].split(","):
    try:
        if find_spec(name) is None:
            missing.append(name)
    except Exception:
        missing.append(name)
out = {"executable": sys.executable, "missing": missing, "error": None,
       "version": "%d.%d.%d" % tuple(sys.version_info[:3])}
if not missing and sys.argv[2] != "-":
    try:
        __import__(sys.argv[2])
    except BaseException as e:
        text = ("%s: %s" % (type(e).__name__, e)).strip().splitlines()
        out["error"] = text[0] if text else type(e).__name__
sys.stdout.write("\n" + MARK + json.dumps(out) + "\n")
""".replace("MARK", repr(MARK))


@dataclasses.dataclass
class Interpreter:
    """The trainer's Python and how it was chosen (for the fix advice)."""
    python: str
    chosen_by: str  # PYTHON | VIRTUAL_ENV | .venv | PATH | --python |
    #                 launcher | HOROVOD_VENV
    described: str  # e.g. "python3 from PATH (no PYTHON, ...)"
    # chosen_by PYTHON: what the run script would choose without it,
    # described (None: not known, e.g. the launcher started directly).
    if_unset: Optional[str] = None


def describe_choice(chosen_by: str, python: str, repo: str) -> str:
    """Why this interpreter, in the words of scripts/lib/launch.sh."""
    return {
        "PYTHON": f"{python} (PYTHON)",
        "--python": f"{python} (--python)",
        "VIRTUAL_ENV": f"{python} (the activated venv, VIRTUAL_ENV)",
        ".venv": f"{python} (the repository's .venv)",
        "PATH": f"{python} (python3 from PATH: PYTHON unset, no activated "
                f"venv, no {os.path.join(repo, '.venv')})",
        "HOROVOD_VENV": f"{python} (the Horovod venv's python, "
                        "LAUNCHER=horovod)",
    }.get(chosen_by, f"{python} (the launcher's own interpreter)")


def unset_choice(settings, repo: str) -> Optional[str]:
    """What the run script would use without PYTHON (the launcher's
    settings: launch_python_unset[_from], from scripts/lib/launch.sh),
    described; None where that is the repository's .venv still to make,
    or not known."""
    python = settings.launch_python_unset
    chosen_by = settings.launch_python_unset_from
    if not python or chosen_by not in ("VIRTUAL_ENV", ".venv"):
        return None
    return describe_choice(chosen_by, python, repo)


def fix_advice(chosen_by: str, repo: str, backend: str = "tensorflow",
               if_unset: Optional[str] = None) -> str:
    """The one thing to do, depending on how the interpreter was chosen
    (`if_unset`: unset_choice's answer, for a PYTHON that is wrong)."""
    make = f"`make bench` in {repo} creates {os.path.join(repo, '.venv')}, " \
        "which the run scripts use when PYTHON is unset"
    needs = [pip for pip in BACKEND_MODULES[backend].values()]
    other = "set PYTHON= to a Python that has " + \
        ", ".join(needs[:-1]) + " and " + needs[-1]
    if chosen_by == "HOROVOD_VENV":
        return "run `make horovod` (scripts/install_horovod.sh builds that " \
            "venv), or set HOROVOD_VENV to one whose python has them"
    if chosen_by == ".venv":
        return f"rebuild it (rm -rf {os.path.join(repo, '.venv')} && make " \
            f"bench), or {other}"
    if chosen_by == "VIRTUAL_ENV":
        return f"install them into the activated venv (pip install -e " \
            f"{repo}), or deactivate it (then {make}), or {other}"
    if chosen_by == "PYTHON":
        unset = f": the run scripts then use {if_unset}" if if_unset \
            else f" ({make})"
        return f"point PYTHON at a Python that has them, or unset it{unset}"
    if chosen_by == "--python":
        return "point --python at a Python that has them, or drop it (the " \
            "trainer then runs the launcher's Python)"
    return f"{make}; or {other}"


def _names(modules: Sequence[str]) -> str:
    table = {**HOROVOD_MODULES}
    for needed in BACKEND_MODULES.values():
        table.update(needed)
    return ", ".join(f"{m} (pip {table[m]})" if m in table and table[m] != m
                     else m for m in modules)


def check(python: str, env: Dict[str, str], timeout: float,
          modules: Sequence[str]) -> Optional[str]:
    """None when `python` imports the trainer; else what is wrong, one line
    without the fix (e.g. "lacks absl (pip absl-py), yaml (pip pyyaml)")."""
    names = list(modules) + ["official_bench"]
    try:
        out = subprocess.run([python, "-c", _CHECK, ",".join(names),
                              TRAINER_IMPORT], env=env, timeout=timeout,
                             capture_output=True, text=True,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return (f"did not finish importing {TRAINER_IMPORT} within "
                f"PYTHON_CHECK_TIMEOUT={timeout:g} s (a slow file system? "
                "raise it, or 0 skips the check)")
    except OSError as e:
        return f"cannot be started: {e.strerror or e}"
    answer = None
    for line in out.stdout.splitlines():
        if line.startswith(MARK):
            try:
                answer = json.loads(line[len(MARK):])
            except ValueError:
                pass
    if answer is None:
        tail = [t.strip() for t in (out.stderr or out.stdout).splitlines()
                if t.strip()]
        return (f"is not a Python that answers `-c` (exit {out.returncode}"
                + (f": {tail[-1][:200]}" if tail else ", no output") + ")")
    if answer.get("missing"):
        return (f"(Python {answer.get('version')}) lacks "
                f"{_names(answer['missing'])}")
    if answer.get("error"):
        return (f"(Python {answer.get('version')}) cannot import "
                f"{TRAINER_IMPORT}: {answer['error'][:300]}")
    return None


def missing_here(modules: Sequence[str]) -> List[str]:
    """Which of `modules` this (the launcher's own) interpreter lacks."""
    missing = []
    for name in modules:
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):
            missing.append(name)
    return missing


def launcher_problem(missing: Sequence[str]) -> str:
    """What missing_here found, as the one-line problem."""
    return f"lacks {_names(missing)}"


def cannot_run_text(described: str, problem: str, fix: str,
                    role: str = "trainer") -> str:
    """The one error line (after its 'who:' prefix): which interpreter, what
    is wrong, and the fix."""
    return f"the {role}'s Python {described} {problem}; fix: {fix}"


def not_a_directory(folder: str) -> Optional[str]:
    """Why `folder` cannot be or become a directory ("/x/logs is a file,
    not a directory": the nearest existing path on the way is not one, or
    one on /proc), or None. Permissions are left to the writes themselves."""
    probe = write_errors.nearest_entry(folder)
    if os.path.isdir(probe):
        return write_errors.refuses_entries(folder)
    if os.path.isfile(probe):
        return f"{probe} is a file, not a directory"
    link = write_errors.broken_link_on_way(folder)
    if link:
        return write_errors.broken_link_cause(link)
    return f"{probe} is not a directory"
