"""Help's width: 80 columns, narrower only with the terminal."""

import argparse
import os

from official_bench.host import terminal


def test_width_is_80_or_the_narrower_terminal(monkeypatch):
    for columns, width in (("200", 80), ("80", 80), ("60", 60), ("10", 40)):
        monkeypatch.setenv("COLUMNS", columns)
        assert terminal.help_width() == width


def test_argparse_wraps_at_80_on_a_wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    p = argparse.ArgumentParser(prog="x", formatter_class=(
        terminal.help_formatter(argparse.RawDescriptionHelpFormatter)))
    p.add_argument("--flag", help="word " * 60)
    lines = p.format_help().splitlines()
    assert max(map(len, lines)) <= 80
    assert sum("word" in line for line in lines) > 3  # wrapped, not cut


def test_absl_width_set_inside_and_restored(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with terminal.fitted_absl_help():
        assert os.environ["COLUMNS"] == "80"
    assert os.environ["COLUMNS"] == "200"
    monkeypatch.delenv("COLUMNS")
    with terminal.fitted_absl_help():
        pass
    assert "COLUMNS" not in os.environ
