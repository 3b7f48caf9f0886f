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


def test_every_knob_has_a_brief():
    assert set(settings_lib.BRIEF) == set(settings_lib.KNOBS_BY_NAME)
