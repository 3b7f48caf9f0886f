"""README.md, BENCHMARKS.md and docs/*.md cannot drift from the code.

Every command line in a ```bash block must be one the project accepts today:
the run scripts with launcher variables and arguments their parser takes,
the Python entry points and console scripts with flags their --help lists,
config keys (--params_override, PARAMS_OVERRIDE) the config schema has, make
targets and variables the Makefile has, files that exist. Any other
command is an error unless it is on the short ALLOWED_COMMANDS list, so a new
command shape gets a check instead of slipping through. Every fence carries
a language (output goes in ```text), so no command hides in an untagged
block, and an indented code block that starts one of our commands is
checked like a ```bash block. A block kept as the record of a measurement
whose tool or flag has gone is skipped where the line right above it is
`<!-- historical: ... -->` naming the commit where it last ran. Relative
links must point at files (and headings) that exist.

The accepted sets are read from the code (official_bench/launch/settings.py,
setup.cfg's console scripts, the entry points' --help, the config builder's
key check, the Makefile), never listed here: a new launcher variable, flag,
config key or console script is accepted as soon as the code has it.
"""

import argparse
import ast
import configparser
import contextlib
import functools
import glob
import io
import os
import re
import shlex
import subprocess
import sys

import pytest

from official_bench.config import loading as config_loading
from official_bench.config.builder import LayerBuilder
from official_bench.config.schema import ExperimentConfig
from official_bench.launch import settings as launch_settings
from support.helpers import REPO

DOC_FILES = ["README.md", "BENCHMARKS.md"] + sorted(
    os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs",
                                                             "*.md")))

# Commands that are not the project's and that the docs may show as they are
# (installing, moving around, other projects' tools). Anything else must be
# handled by a checker below.
ALLOWED_COMMANDS = {
    "pip", "pip3", "git", "cd", ".", "source", "export", "apt-get", "ls",
    "cat", "chmod", "tensorboard", "tfds", "nvidia-smi", "ss", "uptime",
    "lscpu", "date", "squeue", "scancel", "echo", "wait",
    # container engines and runtimes (docs/containers.md, docs/kubernetes.md)
    "docker", "podman", "enroot", "apptainer", "nvidia-ctk", "kubectl",
}
# Commands that run another command: the checkers look inside them.
WRAPPERS = {"srun", "horovodrun", "timeout", "env", "time", "nohup", "exec"}
# `python -m X` for modules that are not ours.
ALLOWED_PY_MODULES = {"venv", "pip", "pytest"}
# Fence languages whose lines are commands; the others are data or output.
SHELL_LANGS = {"bash", "sh", "shell"}
KNOWN_LANGS = SHELL_LANGS | {"text", "json", "python", "yaml", "layers",
                             "sublayers"}
OPERATORS = {"&&", "||", ";", "|", "&"}


# ---- reading markdown -------------------------------------------------------

def code_blocks(text):
    """(language, line number of the first body line, body lines) per
    fenced block; an unclosed fence is returned with language None so the
    caller reports it."""
    blocks, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        m = re.match(r"^```(.*)$", lines[i])
        if not m:
            i += 1
            continue
        lang, start, body = m.group(1).strip(), i + 2, []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        blocks.append((lang if i < len(lines) else None, start, body))
        i += 1
    return blocks


# A line of an indented (4-space) code block that starts a command of the
# project's: such a block is checked as a ```bash block would be.
OUR_COMMAND = re.compile(
    r"^([A-Z_][A-Z0-9_]*=\S*\s+)*(bash|sh|make|sbatch|srun|official-bench"
    r"\S*|\S*python[0-9.]*|\S*run_\w+_node\.sh)(\s|$)")


def indented_blocks(text):
    """(line number of the first body line, body lines) per indented code
    block outside fences whose first line starts one of our commands
    (OUR_COMMAND); output and formulas in such blocks are left alone."""
    blocks, lines, i, fenced = [], text.split("\n"), 0, False
    while i < len(lines):
        if lines[i].startswith("```"):
            fenced = not fenced
        elif not fenced and lines[i].startswith("    ") and \
                (i == 0 or not lines[i - 1].strip()):
            start, body = i + 1, []
            while i < len(lines) and (lines[i].startswith("    ")
                                      or not lines[i].strip()):
                body.append(lines[i][4:])
                i += 1
            if OUR_COMMAND.match(body[0].strip()):
                blocks.append((start, body))
            continue
        i += 1
    return blocks


def command_lines(body, first_line):
    """Logical command lines of a shell block: continuation lines joined,
    blank lines and whole-line comments dropped. Yields (line number,
    text)."""
    pending, start = "", None
    for n, line in enumerate(body, first_line):
        if start is None:
            start = n
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text, pending, here, start = pending + line, "", start, None
        if text.strip() and not text.strip().startswith("#"):
            yield here, text


def split_commands(line):
    """Simple commands of one shell line, as token lists: `$(...)` bodies
    become commands of their own, and `&&`, `||`, `;`, `|`, `&` separate
    commands. Comments are dropped."""
    inner = re.findall(r"\$\(([^()]*)\)", line)
    line = re.sub(r"\$\(([^()]*)\)", "SUBSTITUTED", line)
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    commands, current = [], []
    for token in lexer:
        if token in OPERATORS:
            commands.append(current)
            current = []
        else:
            current.append(token)
    commands.append(current)
    for text in inner:
        commands += split_commands(text)
    return [c for c in commands if c]


def split_assignments(tokens):
    """({NAME: value} of the leading NAME=value words, the other tokens)."""
    env = {}
    while tokens and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[0]):
        name, value = tokens[0].split("=", 1)
        env[name] = value
        tokens = tokens[1:]
    return env, tokens


def github_slug(heading):
    """The anchor GitHub gives a heading, for links to '#section': markup
    (`, *, _emphasis_) dropped, an underscore inside a word kept
    (steps_per_loop)."""
    text = re.sub(r"[`*]|(?<!\w)_+|_+(?!\w)", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path):
    """Anchors of a markdown file's headings (outside code blocks)."""
    slugs, inside = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                inside = not inside
            elif not inside and re.match(r"^#{1,6} ", line):
                slugs.add(github_slug(line.lstrip("#")))
    return slugs


# ---- what the project accepts, read from the code ---------------------------

@functools.lru_cache(maxsize=None)
def launcher_env():
    """Variables the run scripts read: every knob's NAME, the barrier's
    secret, the Slurm variables, the other environ keys settings.py looks up,
    and the ${NAME}s of scripts/lib/launch.sh (PYTHON, VIRTUAL_ENV)."""
    names = {k.env for k in launch_settings.KNOBS}
    names |= {launch_settings.SECRET_ENV} | set(launch_settings.SLURM_VARS)
    source = os.path.join(REPO, "official_bench", "launch", "settings.py")
    with open(source, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        target = None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get" and node.args):
            target, key = node.func.value, node.args[0]
        elif isinstance(node, ast.Subscript):
            target, key = node.value, node.slice
        if (target is not None and "environ" in ast.unparse(target)
                and isinstance(key, ast.Constant)
                and isinstance(key.value, str)):
            names.add(key.value)
    names |= shell_variables(os.path.join(REPO, "scripts", "lib",
                                          "launch.sh"))
    return frozenset(names)


def shell_variables(path):
    """Names a shell file reads as ${NAME} or $NAME."""
    with open(path, encoding="utf-8") as f:
        return set(re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", f.read()))


@functools.lru_cache(maxsize=None)
def launcher_options(mode):
    """Option strings the run script of `mode` accepts (its argparse
    parser, exactly: argparse would also take abbreviations)."""
    parser = launch_settings.build_parser(mode)
    return frozenset(s for a in parser._actions for s in a.option_strings)


def run_script_modes():
    """run_single_node.sh -> single, from the launcher's own table."""
    return {script: mode for mode, script in launch_settings.MODES.items()}


@functools.lru_cache(maxsize=None)
def makefile():
    """(targets -> recipe lines, variables the Makefile reads)."""
    targets, current = {}, None
    with open(os.path.join(REPO, "Makefile"), encoding="utf-8") as f:
        text = f.read()
    for line in text.split("\n"):
        m = re.match(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", line)
        if m:
            current = targets.setdefault(m.group(1), [])
        elif line.startswith("\t") and current is not None:
            current.append(line.strip())
        elif not line.strip().startswith("#"):
            current = None
    variables = set(re.findall(r"\$\(([A-Z_][A-Z0-9_]*)\)", text))
    return targets, frozenset(variables)


@functools.lru_cache(maxsize=None)
def console_scripts():
    """setup.cfg's console scripts: name -> 'module:function'."""
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(REPO, "setup.cfg"))
    lines = cfg["options.entry_points"]["console_scripts"].strip().split("\n")
    return dict(tuple(p.strip() for p in line.split("=", 1))
                for line in lines if "=" in line)


def parse_help_flags(text):
    """Flags an argparse or absl --help lists: the option words at the
    start of lines indented by two spaces (`  -h, --help`, `  --log_dir
    DIR`, absl's `  --[no]run_eagerly: ...`). Prose and examples elsewhere
    in the help are not taken as flags."""
    flags = set()
    for line in text.split("\n"):
        if not re.match(r"^  -", line):
            continue
        head = re.split(r" {2,}|: ", line.strip(), maxsplit=1)[0]
        for part in head.split(", "):
            word = part.split(" ")[0].split("=")[0]
            m = re.match(r"^--(\[no\])?([A-Za-z0-9][\w-]*)$", word)
            if m:
                flags.add("--" + m.group(2))
                if m.group(1):
                    flags.add("--no" + m.group(2))
    return flags


@functools.lru_cache(maxsize=None)
def help_flags(argv):
    """Flags of the program started by `argv` (a tuple), from its --help
    run in a subprocess with this checkout first on PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep +
               os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(list(argv) + ["--help"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (
        f"{' '.join(argv)} --help exited {out.returncode}: "
        f"{out.stderr[-500:]}")
    flags = parse_help_flags(out.stdout + out.stderr)
    assert "--help" in flags or "--helpfull" in flags or flags, argv
    return frozenset(flags | {"--help"})


def module_exists(module):
    """official_bench.x.y names a module or a package with __main__."""
    path = os.path.join(REPO, *module.split("."))
    return (os.path.isfile(path + ".py")
            or os.path.isfile(os.path.join(path, "__main__.py")))


# ---- checking ---------------------------------------------------------------

def is_python(word):
    """python, python3, python3.11, .venv/bin/python, $V/bin/python."""
    return re.search(r"(^|/)python(3(\.\d+)?)?$", word) is not None


# Flags whose value is a --params_override (official-bench-compare's sides
# too).
OVERRIDE_FLAGS = {"--params_override", "--a-override", "--b-override"}


def flag_problems(args, accepted, what):
    """Problems for every --flag in args that `accepted()` lacks, and for
    the values of OVERRIDE_FLAGS and --config_file. `accepted` is called
    only when args have a flag: a command shown without flags never runs
    its program's --help (a script without one would start its work)."""
    problems = []
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name not in accepted():
                problems.append(f"{what}: unknown flag {name}")
            if not eq and i + 1 < len(args):
                value = args[i + 1]
            if name in OVERRIDE_FLAGS:
                problems += override_problems(value, what)
            elif name == "--config_file":
                problems += config_file_problems(value, what)
    return problems


def override_problems(text, what):
    """Config keys of a --params_override / PARAMS_OVERRIDE that the config
    schema lacks, found by the builder's own key check (values are not
    judged: docs may write placeholders, and an item that is a whole shell
    variable, `$BASE,history.enabled=false`, stands for keys given above)."""
    if "..." in text:
        return []
    text = ",".join(item for item in text.split(",")
                    if not re.fullmatch(r"\$\{?[A-Za-z_]\w*\}?", item))
    if not text:
        return []
    try:
        tree = config_loading.parse_params_override(text)
    except ValueError as e:  # ConfigError
        return [f"{what}: params_override {text!r} does not parse: {e}"]
    builder = LayerBuilder()
    builder.merge({}, tree, "docs", ExperimentConfig)
    return [f"{what}: {e}" for e in builder.errors]


def config_file_problems(path, what):
    """A --config_file / CONFIG_FILE inside the repository must exist."""
    if "..." in path or os.path.isabs(path) or not path.endswith(
            (".yaml", ".yml")):
        return []
    if not os.path.isfile(os.path.join(REPO, path)):
        return [f"{what}: no such config file {path}"]
    return []


def check_run_script(script, args, env, extra_env=frozenset()):
    """A run script: its variables are launcher variables, its arguments
    parse with the launcher's parser (positional BATCH DTYPE TEST_NUM)."""
    mode = run_script_modes()[os.path.basename(script)]
    problems = [f"{script}: {name} is not a variable the launcher reads"
                for name in env
                if name not in launcher_env() | extra_env]
    if "PARAMS_OVERRIDE" in env:
        problems += override_problems(env["PARAMS_OVERRIDE"], script)
    if "CONFIG_FILE" in env:
        problems += config_file_problems(env["CONFIG_FILE"], script)
    problems += flag_problems(args, lambda: launcher_options(mode), script)
    try:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            launch_settings.parse(args, environ={}, mode=mode)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        if e.code in (0, None):
            return problems
        problems.append(f"{script} {' '.join(args)}: the launcher's parser "
                        f"refuses it: {err.getvalue().strip()[-200:]}")
    except launch_settings.SettingsError as e:
        problems.append(f"{script} {' '.join(args)}: {e}")
    return problems


def check_bash(tokens, env):
    """`bash X.sh ...`: the script exists; run scripts are checked by the
    launcher's parser, other scripts' --flags against their --help."""
    if len(tokens) < 2:
        return ["bash without a script"]
    script, args = tokens[1], tokens[2:]
    if not os.path.isfile(os.path.join(REPO, script)):
        return [f"no such script: {script}"]
    if os.path.basename(script) in run_script_modes():
        return check_run_script(script, args, env)
    return flag_problems(args, lambda: help_flags(("bash", script)),
                         script)


def check_python(tokens):
    """`python -m official_bench.X ...` or `python file.py ...`."""
    args = tokens[1:]
    if args[:1] == ["-m"] and len(args) > 1:
        module, rest = args[1], args[2:]
        if module.split(".")[0] in ALLOWED_PY_MODULES:
            return []
        if not module.startswith("official_bench"):
            return [f"python -m {module}: not a module of this project"]
        if not module_exists(module):
            return [f"python -m {module}: no such module"]
        return flag_problems(
            rest, lambda: help_flags((sys.executable, "-m", module)), module)
    if args[:1] == ["-c"]:
        return []
    if args and args[0].endswith(".py"):
        if not os.path.isfile(os.path.join(REPO, args[0])):
            return [f"no such file: {args[0]}"]
        return flag_problems(
            args[1:], lambda: help_flags((sys.executable, args[0])), args[0])
    return [f"python {' '.join(args)[:40]}: not a command shape this test "
            "knows"]


def check_console_script(tokens):
    """`official-bench-X ...`: setup.cfg installs it; its flags are its
    --help's."""
    entry = console_scripts().get(tokens[0])
    if entry is None:
        return [f"{tokens[0]}: not a console script in setup.cfg"]
    module, function = entry.split(":")
    starter = (sys.executable, "-c",
               f"import sys; sys.argv[0] = {tokens[0]!r}; "
               f"from {module} import {function}; {function}()")
    return flag_problems(tokens[1:], lambda: help_flags(starter),
                         tokens[0])


def check_make(tokens):
    """`make T [VAR=value]`: the target exists, the variables are ones the
    Makefile reads, and ARGS' flags are those of the module the target's
    recipe passes $(ARGS) to."""
    targets, variables = makefile()
    problems, named, assigns = [], [], {}
    for token in tokens[1:]:
        if token.startswith("-"):
            continue
        if "=" in token:
            name, value = token.split("=", 1)
            assigns[name] = value
            if name not in variables:
                problems.append(f"make: {name} is not a Makefile variable")
        else:
            named.append(token)
            if token not in targets:
                problems.append(f"make: no target {token}")
    for target in named:
        for line in targets.get(target, []):
            m = re.search(r"-m (official_bench[\w.]*)", line)
            if m and "$(ARGS)" in line and "ARGS" in assigns:
                problems += flag_problems(
                    shlex.split(assigns["ARGS"]),
                    functools.partial(help_flags,
                                      (sys.executable, "-m", m.group(1))),
                    f"make {target} ARGS")
    return problems


def check_sbatch(tokens, env):
    """`sbatch [--opt=v] file.sbatch args`: the batch script exists and its
    arguments and variables suit the run script it starts."""
    rest = tokens[1:]
    while rest and rest[0].startswith("-"):
        rest = rest[1:]
    if not rest or not os.path.isfile(os.path.join(REPO, rest[0])):
        return [f"sbatch: no such batch script: {rest[:1]}"]
    path = os.path.join(REPO, rest[0])
    with open(path, encoding="utf-8") as f:
        m = re.search(r"bash (run_\w+_node\.sh)", f.read())
    if not m:
        return [f"sbatch {rest[0]}: starts no run script"]
    return check_run_script(m.group(1), rest[1:], env,
                            frozenset(shell_variables(path)))


def check_wrapped(tokens):
    """srun/horovodrun/timeout ... CMD: check the inner command (the first
    word that starts one of ours), skipping the wrapper's own options."""
    for i, word in enumerate(tokens[1:], 1):
        if (word == "bash" or is_python(word) or word in console_scripts()
                or os.path.basename(word) in run_script_modes()):
            return check_command(tokens[i:])
    return []


def check_command(tokens):
    """Problems of one simple command (a token list)."""
    env, tokens = split_assignments(tokens)
    if not tokens:
        return []
    word = tokens[0]
    if word in ("bash", "sh"):
        return check_bash(tokens, env)
    if os.path.basename(word) in run_script_modes():
        return check_bash(["bash"] + tokens, env)
    if is_python(word):
        return check_python(tokens)
    if word.startswith("official-bench"):
        return check_console_script(tokens)
    if word == "make":
        return check_make(tokens)
    if word == "sbatch":
        return check_sbatch(tokens, env)
    if word in WRAPPERS:
        return check_wrapped(tokens)
    if word in ALLOWED_COMMANDS:
        return []
    return [f"{word}: a command this test does not know (check it, or add "
            "it to ALLOWED_COMMANDS if it is not the project's)"]


def check_links(text, path):
    """Relative links that point at no file or no heading."""
    problems, here = [], os.path.dirname(path)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(here, file_part)) \
            if file_part else path
        if not os.path.exists(dest):
            problems.append(f"link to a missing file: {target}")
        elif anchor and dest.endswith(".md") and \
                anchor not in headings(dest):
            problems.append(f"link to a missing heading: {target}")
    return problems


def check_markdown(text, path):
    """Every problem of one markdown text (`path` places its links)."""
    problems = check_links(text, path)
    for lang, line, body in code_blocks(text):
        if lang is None:
            problems.append(f"line {line - 1}: unclosed code fence")
        elif lang not in KNOWN_LANGS:
            problems.append(f"line {line - 1}: fence language {lang!r} is "
                            f"not one of {sorted(KNOWN_LANGS)} (output: "
                            "```text)")
        elif lang in SHELL_LANGS and not historical(text, line - 1):
            problems += shell_problems(body, line)
    for line, body in indented_blocks(text):
        if not historical(text, line):
            problems += shell_problems(body, line)
    return problems


# A block kept as the record of a past measurement, whose tool or flag has
# gone: the comment right before it names the commit where it last ran.
HISTORICAL = re.compile(r"^<!-- historical: .*\b[0-9a-f]{7,40}\b.*-->$")


def historical(text, line):
    """Whether the last non-blank line above line `line` (1-based: a
    fence, or an indented block's first line) is a HISTORICAL comment."""
    above = [t for t in text.split("\n")[:line - 1] if t.strip()]
    return bool(above) and HISTORICAL.match(above[-1].strip()) is not None


def shell_problems(body, first_line):
    """Every problem of the commands of one shell block."""
    problems = []
    for n, command in command_lines(body, first_line):
        try:
            commands = split_commands(command)
        except ValueError as e:  # shlex: an unclosed quote
            problems.append(f"line {n}: not a shell command: {e}")
            continue
        for tokens in commands:
            problems += [f"line {n}: {p}" for p in check_command(tokens)]
    return problems


# ---- the tests --------------------------------------------------------------

@pytest.mark.parametrize("name", DOC_FILES)
def test_every_command_and_link_is_accepted(name):
    path = os.path.join(REPO, name)
    with open(path, encoding="utf-8") as f:
        problems = check_markdown(f.read(), path)
    assert not problems, f"{name}:\n" + "\n".join(problems)


def test_every_launcher_variable_is_documented():
    """docs/nodes.md names every variable the run scripts take (their
    --help lists them too, but a reader of the docs should not need it)."""
    with open(os.path.join(REPO, "docs", "nodes.md"), encoding="utf-8") as f:
        text = f.read()
    missing = [k.env for k in launch_settings.KNOBS
               if f"`{k.env}`" not in text]
    assert not missing, ("launcher variables docs/nodes.md does not "
                         f"mention (add them to its Options list): {missing}")


def test_readme_has_commands_to_check():
    """The check above is not vacuous: README shows the headline flow."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    shell = [c for lang, line, body in code_blocks(text)
             if lang in SHELL_LANGS for _, c in command_lines(body, line)]
    joined = "\n".join(shell)
    for needle in ("bash run_single_node.sh 256 fp16", "make bench",
                   "make test", "python extract_tensorflow_logs.py"):
        assert needle in joined, needle


FAKE = os.path.join(REPO, "README.md")


@pytest.mark.parametrize("text, expected", [
    ("```bash\npython extract_tensorflow_logs.py --no_such_flag 1\n```\n",
     "unknown flag --no_such_flag"),
    ("```bash\nNO_SUCH_VAR=1 bash run_single_node.sh 16 fp32\n```\n",
     "NO_SUCH_VAR is not a variable the launcher reads"),
    ("```bash\nbash run_single_node.sh 16 fp99\n```\n", "fp99"),
    ("```bash\nbash run_two_node.sh --no-such-option\n```\n",
     "unknown flag --no-such-option"),
    ("```bash\nbash run_nine_node.sh 16\n```\n", "no such script"),
    ("```bash\npython -m official_bench.classifier_trainer \\\n"
     "    --model_dir=/tmp/x --no_such_flag=1\n```\n",
     "unknown flag --no_such_flag"),
    ("```bash\nofficial-bench-nothing --help\n```\n",
     "not a console script"),
    ("```bash\nofficial-bench-extract --log_dirr x\n```\n",
     "unknown flag --log_dirr"),
    ("```bash\nmake no_such_target\n```\n", "no target no_such_target"),
    ("```bash\npython -m official_bench.classifier_trainer "
     "--params_override='train.stpes=20'\n```\n",
     "train.stpes: unknown key"),
    ("```bash\nPARAMS_OVERRIDE=runtime.no_such_key=1 bash run_single_node.sh"
     "\n```\n", "runtime.no_such_key: unknown key"),
    ("```bash\npython -m official_bench.classifier_trainer "
     "--config_file=configs/no_such.yaml\n```\n", "no such config file"),
    ("```bash\nmake bench ARGS=\"--no_such_flag=1\"\n```\n",
     "unknown flag --no_such_flag"),
    ("```bash\nmake bench NO_SUCH=1\n```\n", "NO_SUCH is not a Makefile"),
    ("```bash\nfrobnicate --now\n```\n", "frobnicate: a command this test"),
    ("```bash\nsrun -N 2 bash run_two_node.sh 16 fp32 --frob\n```\n",
     "unknown flag --frob"),
    ("```bash\nsbatch examples/slurm/nothing.sbatch 16\n```\n",
     "no such batch script"),
    ("```bash\nV=$(bash scripts/install_horovod.sh --no-such)\n```\n",
     "unknown flag --no-such"),
    ("```\nbash run_single_node.sh 16\n```\n", "fence language ''"),
    ("```bash\nbash run_single_node.sh [BATCH=config's]\n```\n",
     "not a shell command"),
    # an indented code block is read too where it starts one of our commands
    ("takes\n\n    bash run_single_node.sh 16 fp99\n\nruns\n", "fp99"),
    ("a list:\n\n- item\n\n    NODES=a:1 bash run_two_node.sh "
     "--no-such-option\n", "unknown flag --no-such-option"),
    ("servers:\n\n    python -m official_bench.data.feeds.service \\\n"
     "      --no_such_flag 1\n", "unknown flag --no_such_flag"),
    # official-bench-compare's sides are --params_override strings; a whole
    # $NAME item stands for keys given elsewhere, the others are checked
    ("```bash\nofficial-bench-compare --a-override 'train.stpes=20'\n```\n",
     "train.stpes: unknown key"),
    ("```bash\nofficial-bench-compare --b-override \"$BASE,history.enable=1\""
     "\n```\n", "history.enable: unknown key"),
    # a historical block needs the marker right above it, with a commit
    ("<!-- historical: its flag is gone -->\n```bash\n"
     "bash run_single_node.sh 16 fp99\n```\n", "fp99"),
    ("<!-- historical: ran at 616a511 -->\n\nsee above\n\n"
     "    bash run_single_node.sh 16 fp99\n", "fp99"),
    ("see [the page](docs/no_such_page.md)\n", "missing file"),
    ("see [the page](docs/design.md#no-such-heading)\n", "missing heading"),
])
def test_the_check_refuses_drift(text, expected):
    problems = check_markdown(text, FAKE)
    assert any(expected in p for p in problems), problems


def test_the_check_accepts_the_shapes_it_knows():
    text = ("```bash\n"
            "TEST_NUM=1 STEPS=30 bash run_single_node.sh 16 fp32\n"
            "NODES=a:1,b:1 bash run_two_node.sh 256 fp16 5 --dry-run\n"
            "python -m official_bench.classifier_trainer --norun_eagerly "
            "--config_file=configs/examples/resnet/imagenet/gpu.yaml "
            "--params_override=runtime.num_gpus=8,train.steps=600 "
            "# a comment --not_a_flag\n"
            "official-bench-extract --log_dir x --method time &\n"
            "make doctor ARGS=\"--quick\" && make test-fast\n"
            "DEVICE=cpu sbatch --gres=none examples/slurm/two_nodes.sbatch "
            "16 fp32 1\n"
            "pip install -e .\n"
            "official-bench-compare --a-override "
            "\"$BASE,history.enabled=false\" --b-override "
            "\"${BASE},history.enabled=true\" --pairs 3\n"
            "```\n"
            "<!-- historical: ran at 616a511, the flag went in 3811e8c -->\n"
            "```bash\nbash run_single_node.sh 16 --no-such-option\n```\n"
            "<!-- historical: ran at 616a511 -->\n\n"
            "    python run_nothing.py --gone\n\n"
            "[design](docs/design.md#layers)\n\n"
            "    [launch] error: output, not a command --no_such_flag\n\n"
            "    bash run_single_node.sh 16 fp32 1 --dry-run\n")
    assert check_markdown(text, FAKE) == []


def test_a_command_without_flags_runs_no_help(monkeypatch):
    """--help is run only to check flags: a script without one (such as
    scripts/gpu_jax_check.sh, which takes it for OUT_DIR) is not started."""
    def refuse(argv):
        raise AssertionError(f"ran {' '.join(argv)} --help")
    monkeypatch.setitem(globals(), "help_flags", refuse)
    text = ("```bash\nbash scripts/gpu_jax_check.sh OUT\n"
            "python benchmarks/sampler_cost.py\n"
            "python -m official_bench.doctor\nofficial-bench-extract\n```\n")
    assert check_markdown(text, FAKE) == []


@pytest.mark.parametrize("heading, slug", [
    ("steps_per_loop: host cost per step",
     "steps_per_loop-host-cost-per-step"),
    ("data_format: auto for bfloat16", "data_format-auto-for-bfloat16"),
    ("The _emphasised_ `code` word", "the-emphasised-code-word"),
    ("Trainer overhead: the trainer against a bare tf.function loop",
     "trainer-overhead-the-trainer-against-a-bare-tffunction-loop"),
])
def test_heading_anchors_are_githubs(heading, slug):
    assert github_slug(heading) == slug


def test_help_parsing_takes_option_lines_only():
    text = ("usage: x [--a A]\n\n  --real REAL   help mentioning --fake\n"
            "  -h, --help    show\n  --[no]switch: absl boolean\n"
            "                        --continuation_is_not_a_flag\n"
            "    --absl_continuation_is_not_either\n")
    assert parse_help_flags(text) == {"--real", "--help", "--switch",
                                      "--noswitch"}


def test_flags_are_matched_whole():
    """argparse's abbreviations are not accepted: flags are matched whole."""
    assert "--warmup" not in help_flags((sys.executable,
                                         "extract_tensorflow_logs.py"))
    assert isinstance(launch_settings.build_parser("single"),
                      argparse.ArgumentParser)
