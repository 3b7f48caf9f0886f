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
