"""The run scripts' --help (issue 28 §5): short, one script each, 80
columns; the long form of every knob is docs/run_scripts.md."""

import os
import re

import pytest

from official_bench.launch import settings as settings_lib
from support.helpers import REPO
from support.launch_cli import SCRIPTS, script

DOCS = os.path.join(REPO, settings_lib.DOCS_PAGE)


@pytest.mark.parametrize("mode", sorted(SCRIPTS))
def test_help_is_short_fits_80_columns_and_names_its_own_nodes(tmp_path,
                                                               mode):
    out = script(mode, tmp_path, "--help")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    wide = [line for line in lines if len(line) > 80]
    assert wide == [], wide
    assert lines[0] == (f"usage: bash run_{mode}_node.sh [BATCH] [DTYPE] "
                        "[TEST_NUM] [options]")
    examples = out.stdout.split("examples:\n", 1)[1].split("\n\n", 1)[0]
    commands = [line for line in examples.splitlines()
                if f"run_{mode}_node.sh" in line]
    assert len(commands) == 3, examples
    assert out.stdout.index("examples:") < out.stdout.index("options:")
    assert settings_lib.DOCS_PAGE in out.stdout
    node_flags = [k.flag for k in settings_lib.KNOBS
                  if k.section in settings_lib.NODE_SECTIONS]
    shown = [f for f in node_flags if re.search(re.escape(f) + r"\b",
                                                out.stdout)]
    if mode == "single":
        assert shown == [], shown
        for other in ("run_two_node.sh", "run_multi_node.sh"):
            assert other not in out.stdout
    else:
        assert shown == node_flags
    assert "--quiet" in out.stdout


def test_launcher_module_help_fits_80_columns(tmp_path):
    """No argparse choice list split mid-word: the width is fixed."""
    parser = settings_lib.build_parser(None)
    text = parser.format_help()
    assert [line for line in text.splitlines() if len(line) > 80] == []
    assert "{multi,single,two}" in text


def test_docs_page_holds_every_launcher_variable():
    with open(DOCS, encoding="utf-8") as f:
        docs = f.read()
    for knob in settings_lib.KNOBS:
        assert f"`{knob.env}`" in docs, knob.env
    assert settings_lib.reference_markdown() in docs, (
        "docs/run_scripts.md's variable table differs from settings.KNOBS; "
        "regenerate it with settings.reference_markdown()")


def test_single_node_still_accepts_node_options_it_does_not_list():
    s = settings_lib.parse(["--nodes", "a:1,b:2"], environ={}, mode="single")
    assert s.nodes == "a:1,b:2"


def test_every_knob_row_carries_the_brief_its_help_line_shows():
    """Each knob's one --help line is a field of its row (issue 44 §3)."""
    parser = settings_lib.build_parser(None)
    helps = {a.dest: a.help for a in parser._actions}
    for knob in settings_lib.KNOBS:
        assert knob.brief and "\n" not in knob.brief, knob.name
        assert helps[knob.name].startswith(knob.brief), knob.name


def _launcher_statuses():
    """Every exit_status constant the launcher's code returns (a `return`
    of `es.NAME`, or es.by_signal: 128 + SIGINT / SIGTERM)."""
    import ast

    from official_bench.contracts import exit_status as es

    def statuses(value):
        if isinstance(value, ast.IfExp):
            return statuses(value.body) | statuses(value.orelse)
        if isinstance(value, ast.Call):
            value = value.func
        if isinstance(value, ast.Attribute) and \
                getattr(value.value, "id", "") == "es":
            if value.attr == "by_signal":
                return {es.INTERRUPTED, es.TERMINATED}
            status = getattr(es, value.attr)  # not es.describe(...) text
            return {status} if isinstance(status, int) else set()
        return set()

    found = set()
    folder = os.path.join(REPO, "official_bench", "launch")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Return) and node.value is not None:
                found |= statuses(node.value)
    return found


def test_exit_statuses_in_help_are_the_tables_and_the_launchers():
    """The epilog's exit statuses are generated from
    contracts/exit_status.py: exactly those the launcher returns, in the
    table's order, statuses with the same words joined."""
    from official_bench.contracts import exit_status as es
    words = settings_lib.EXIT_WORDS
    assert set(words) == _launcher_statuses()
    text = settings_lib.build_parser("single").format_help()
    block = text[text.index("exit status: "):].split("\nevery variable")[0]
    assert block == settings_lib.exit_help(words)
    named = [int(n) for n in re.findall(r"(?<![\w=])(\d+)(?=[ /])", block)]
    assert named == [c.code for c in es.TABLE if c.code in words]
    assert "130/143 interrupted" in " ".join(block.split())
    # The table's order, whatever the order of the words given.
    assert settings_lib.exit_help(dict(reversed(list(words.items())))) == \
        block
    with pytest.raises(KeyError, match="99"):
        settings_lib.exit_help({99: "not a row"})


def test_docs_exit_status_section_names_the_same_statuses():
    with open(DOCS, encoding="utf-8") as f:
        docs = f.read()
    section = docs.split("## Exit status\n", 1)[1].split("\nThe one table")[0]
    named = {int(n) for n in re.findall(r"(?<![\w=])(\d+)(?=[ /.,])",
                                        section)}
    assert named == set(settings_lib.EXIT_WORDS), section


@pytest.mark.parametrize("args, flag, closest", [
    (["--model=resnet50"], "--model", "--model-dir"),  # tf_cnn_benchmarks'
    (["--model", "resnet50", "16"], "--model", "--model-dir"),
    (["--bat", "16"], "--bat", "--batch"),
    (["--data", "/x"], "--data", "--data-dir"),
])
def test_an_abbreviation_is_an_unknown_flag(tmp_path, args, flag, closest):
    """No prefix of an option is taken for it (argparse's allow_abbrev):
    one line naming the flag and the closest one, exit 2."""
    out = script("single", tmp_path, *args, "--dry-run")
    assert out.returncode == 2, out.stdout
    assert out.stdout == ""
    assert out.stderr == (f"bash run_single_node.sh: error: unknown flag "
                          f"{flag} (did you mean {closest}?); see --help\n")
