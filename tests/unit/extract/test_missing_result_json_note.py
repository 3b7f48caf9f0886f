"""The extractor's stderr note for counted runs without a result JSON beside
their log (DLPerf's scripts delete ../output, their model_dir, before each
run), and its hint for a --log_dir that exists only next to the repository
(no TensorFlow)."""

import types

from absl import logging as absl_logging

from official_bench.extract import extractor as extract
from official_bench.training import run_record
from support import logkit as kit

SPEEDS = [90.0] + [100.0] * 6  # steps 0..700: warm-up, then 100 img/s
WRITTEN = "official_bench: result written to "


def _run(log_dir, case, index, with_json=False, written_to=None):
    """A run's log (ending with the trainer's 'result written to' line when
    `written_to`) and, with `with_json`, its result JSON beside it."""
    lines = kit.run_lines(SPEEDS, global_batch=128 * kit.devices(case))
    if written_to:
        lines.insert(-1, kit.absl_prefix(kit.BASE_TIME) + WRITTEN
                     + written_to)
    path = kit.write_lines(kit.log_path(log_dir, case, index=index), lines)
    if with_json:
        kit.write_json(path[:-4] + ".json", kit.result_json(
            [(k * 100, k * 100 + 100, s) for k, s in enumerate(SPEEDS)],
            128 * kit.devices(case), kit.devices(case)))
    return path


def _main(capsys, log_dir, tmp_path):
    rc = extract.main(["--log_dir", str(log_dir), "--output_dir",
                       str(tmp_path / "result"), "--no_plot", "--no_html"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out, err


def _notes(err):
    return [line for line in err.splitlines()
            if line.startswith("note:") and "result JSON" in line]


def test_dlperf_script_runs_get_one_note_naming_the_deletion(tmp_path,
                                                             capsys):
    log_dir = tmp_path / "bz128"
    for case in ("1n1g", "1n4g", "1n8g"):
        _run(log_dir, case, 1, written_to="../output/result.json")
    out, err = _main(capsys, log_dir, tmp_path)
    notes = _notes(err)
    assert len(notes) == 1, err
    note = notes[0]
    assert note.startswith("note: 3 of 3 counted run(s) have no result JSON "
                           "beside their log: no environment, device, MFU "
                           "or input-wait figures for them"), note
    assert "../output/result.json" in note
    assert "DLPerf's *_train.sh scripts" in note
    assert "rm -rf ../output" in note
    # stdout (DLPerf's table) is what it was: the same text as without
    # the note, and the same as for logs without the trainer's line
    assert note not in out and "result JSON" not in out
    assert out == extract.stdout_text(extract.extract(str(log_dir)))
    plain = tmp_path / "plain" / "bz128"
    for case in ("1n1g", "1n4g", "1n8g"):
        _run(plain, case, 1)
    plain_out, _ = _main(capsys, plain, tmp_path / "plain")
    assert plain_out == out


def test_some_runs_without_json_are_counted_without_dlperf_words(tmp_path,
                                                                 capsys):
    """Logs without the trainer's line (DLPerf's own logs): the note says
    what is missing and nothing about where the file went."""
    log_dir = tmp_path / "bz128"
    _run(log_dir, "1n1g", 1, with_json=True)
    _run(log_dir, "1n1g", 2)
    _run(log_dir, "1n2g", 1, with_json=True)
    _, err = _main(capsys, log_dir, tmp_path)
    assert _notes(err) == [
        "note: 1 of 3 counted run(s) have no result JSON beside their log: "
        "no environment, device, MFU or input-wait figures for them"], err


def test_a_json_written_elsewhere_is_named_without_blaming_dlperf(tmp_path):
    log_dir = tmp_path / "bz128"
    _run(log_dir, "1n1g", 1, written_to="/data/runs/a/result.json")
    _run(log_dir, "1n1g", 2, written_to="/data/runs/b/result.json")
    notes = extract.extract(str(log_dir)).notes
    assert len(notes) == 1
    assert notes[0].endswith("; their logs say the trainer wrote it to "
                             "/data/runs/a/result.json, "
                             "/data/runs/b/result.json"), notes


def test_no_note_when_every_counted_run_has_its_json(tmp_path, capsys):
    log_dir = tmp_path / "bz128"
    _run(log_dir, "1n1g", 1, with_json=True)
    _run(log_dir, "1n2g", 1, with_json=True)
    # a crashed run is excluded, so its missing JSON is not counted
    kit.write_lines(kit.log_path(log_dir, "1n2g", index=2), kit.run_lines(
        SPEEDS[:2], finished=False, exception="RuntimeError: boom"))
    assert extract.extract(str(log_dir)).notes == []
    _, err = _main(capsys, log_dir, tmp_path)
    assert _notes(err) == [], err


def test_the_note_reads_the_line_the_trainer_writes(tmp_path, monkeypatch):
    """The pattern follows training/run_record.py's log line."""
    seen = []
    monkeypatch.setattr(absl_logging, "info",
                        lambda msg, *a: seen.append(msg % a))
    path = str(tmp_path / "result.json")
    run_record.write_result(
        path, types.SimpleNamespace(as_dict=dict), stats=None,
        environment={}, history={}, evaluation={}, model={}, task={})
    assert len(seen) == 1
    log = tmp_path / "run.log"
    log.write_text("I1201 07:59:34.976046 1397 run_record.py:69] "
                   + seen[0] + "\n")
    assert extract.result_written_to(str(log)) == path


def test_missing_log_dir_points_next_to_the_repository(tmp_path, monkeypatch,
                                                       capsys):
    """DLPerf's README gives --log_dir=logs/...; its scripts write ../logs."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "logs" / "tensorflow" / "resnet50" / "bz16").mkdir(
        parents=True)
    monkeypatch.chdir(repo)
    rc = extract.main(["--log_dir", "logs/tensorflow/resnet50/bz16"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err == ("error: log directory logs/tensorflow/resnet50/bz16 does "
                   "not exist or is not a directory (DLPerf's scripts write "
                   "next to the repository: --log_dir "
                   "../logs/tensorflow/resnet50/bz16)\n")
    rc = extract.main(["--log_dir", "logs/tensorflow/resnet50/bz32"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err == ("error: log directory logs/tensorflow/resnet50/bz32 does "
                   "not exist or is not a directory\n")
