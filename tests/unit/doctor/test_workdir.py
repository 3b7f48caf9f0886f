"""official-bench-doctor with a --workdir or --output it cannot write:
exit 5 with one line naming the path, before any check runs (was a
FileExistsError / NotADirectoryError traceback, after the checks)."""

import pytest

from official_bench.contracts import exit_status as es
from official_bench.doctor import cli
from official_bench.host import gpu_diagnosis as gd
from support.doctor_facts import NO_SMI


@pytest.fixture
def no_probe(monkeypatch):
    """A machine whose TensorFlow imports, without running the probes;
    a check that starts fails the test."""
    machine = cli.Machine({"tensorflow": "2.21.0", "gpus": []}, None, NO_SMI,
                          gd.Diagnosis("x", "y"), None, "no GPU", None,
                          "no Horovod venv", "no GPU here")
    monkeypatch.setattr(cli, "gather", lambda *a, **k: machine)
    monkeypatch.setattr(cli.run_checks, "run_check", lambda *a: 1 / 0)


@pytest.mark.parametrize("args, words", [
    (["--workdir", "{f}"],
     "cannot write the checks' run folders to {f}/runs: a part of the path "
     "is a file, not a folder"),
    (["--workdir", "{f}/sub"],
     "cannot write the checks' run folders to {f}/sub/runs: a part of"),
    (["--workdir", "{d}", "--output", "{f}/doctor.json"],
     "cannot write the doctor's report to {f}/doctor.json: a part of"),
    (["--workdir", "{d}", "--output", "{d}"],
     "cannot write the doctor's report to {d}: a folder is in the file's"),
    (["--workdir", "{link}/doc"],  # a scratch link whose target is gone
     "cannot write the checks' run folders to {link}/doc/runs: {link} is a "
     "broken symbolic link"),
])
def test_unwritable_workdir_or_output_is_exit_5_before_the_checks(
        no_probe, tmp_path, capsys, args, words):
    f = tmp_path / "a_file"
    f.write_text("")
    names = {"f": str(f), "d": str(tmp_path / "wd"),
             "link": str(tmp_path / "scratch")}
    (tmp_path / "scratch").symlink_to(tmp_path / "not-mounted")
    (tmp_path / "wd").mkdir()
    argv = [a.format(**names) for a in args] + ["--only", "cpu-fp32-*"]
    assert cli.main(argv, out=lambda line: None) == es.NOT_WRITABLE
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: " + words.format(**names)), err
    assert "Traceback" not in "\n".join(err)


def test_eexist_is_not_writable_only_for_a_file_above_the_path(tmp_path):
    import os

    from official_bench.host.write_errors import NotWritable, writing
    f = tmp_path / "a_file"
    f.write_text("")
    with pytest.raises(NotWritable, match="a part of the path is a file"):
        with writing(str(f / "out.json"), "x"):
            os.makedirs(str(f), exist_ok=True)
    # An exclusive write onto an existing file stays FileExistsError.
    with pytest.raises(FileExistsError) as e:
        with writing(str(f), "x"):
            os.link(str(f), str(f))
    assert not isinstance(e.value, NotWritable)
