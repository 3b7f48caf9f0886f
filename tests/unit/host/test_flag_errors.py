"""host/flag_errors.py: a flag error is one line naming the flag and the
closest valid one, exit 2 (every entry point's parser; the processes are
tested in tests/unit/test_console_help.py)."""

import pytest

from official_bench.contracts import exit_status
from official_bench.host import flag_errors


def _parser():
    p = flag_errors.OneLineParser(prog="tool")
    p.add_argument("--log_dir")
    p.add_argument("--method", choices=("mean", "time"))
    p.add_argument("--steps", type=int)
    return p


def _error(capsys, argv):
    with pytest.raises(SystemExit) as e:
        _parser().parse_args(argv)
    assert e.value.code == exit_status.CONFIG == flag_errors.CONFIG
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    return err


def test_unknown_flag_names_the_closest(capsys):
    assert _error(capsys, ["--log_dri", "x"]) == (
        "tool: error: unknown flag --log_dri (did you mean --log_dir?); "
        "see --help\n")
    assert "unknown flag --log_dri (did you mean --log_dir?)" in _error(
        capsys, ["--log_dri=x"])
    # Nothing near: the flag alone, and --help.
    assert _error(capsys, ["--zzzzzz"]) == (
        "tool: error: unknown flag --zzzzzz; see --help\n")


def test_bad_choice_names_the_closest_value(capsys):
    err = _error(capsys, ["--method", "medain"])
    assert "argument --method: invalid choice: 'medain'" in err
    assert "(did you mean mean?); see --help" in err


def test_bad_value_and_extra_words_are_one_line(capsys):
    assert "argument --steps: invalid int value: 'many'" in _error(
        capsys, ["--steps", "many"])
    assert "unexpected argument(s) ['word']" in _error(capsys, ["word"])


def test_good_arguments_parse():
    ns = _parser().parse_args(["--log_dir", "d", "--method", "time"])
    assert (ns.log_dir, ns.method, ns.steps) == ("d", "time", None)
    assert flag_errors.closest("--num_gpu", ["--num_gpus", "--mode"]) == \
        "--num_gpus"


def test_an_unknown_flag_is_named_before_a_missing_required_one(capsys):
    """argparse reports a missing required flag first, hiding the typo that
    caused it; abbreviations and negative numbers are not unknown flags."""
    parser = flag_errors.OneLineParser(prog="p")
    parser.add_argument("--db", required=True)
    parser.add_argument("--offset", type=int, default=0)
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--dv", "x"])
    assert stop.value.code == 2
    assert capsys.readouterr().err == \
        "p: error: unknown flag --dv (did you mean --db?); see --help\n"
    ns = parser.parse_args(["--d", "x", "--offset", "-3"])
    assert (ns.db, ns.offset) == ("x", -3)
