"""The extractor end to end: CLI, result files, reports, plot, atomic writes.

tests/fixtures/logs/bz128 is a hand-made log tree (fp32, batch 128, log_steps
100); its expected numbers, worked out by hand:

    1n1g runs 1-3: counted speeds (100-600) average 320, 310, 330
        -> average 320, median 320 (run 1 also has a result JSON)
    1n2g runs 1-2: 620, 610 -> average = median = 615; run 3 crashed (OOM)
        speedup 615/320 = 1.921875 -> 1.92, efficiency 0.9609
    2n2g runs 1,3,4: 1200, 1180, 1190 -> 1190; run 2 truncated at step 300
        speedup 1190/320 = 3.71875 -> 3.72, efficiency 0.9297
    misc/notes.log: not in the layout, skipped with a warning
"""

import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys

import pytest

from official_bench.contracts import exit_status  # noqa: E402
from official_bench.extract import (
    extractor as extract,  # noqa: E402
    tables,  # noqa: E402
)
from official_bench.extract.errors import ExtractError  # noqa: E402
from official_bench.host import atomic  # noqa: E402
from support import logkit as kit

REPO = os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "logs", "bz128")


def run_cli(capsys, *argv):
    """main(argv) -> (exit status, stdout, stderr)."""
    status = extract.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def fixture_result(tmp_path, capsys):
    """Run the CLI on the fixture tree once; returns (status, out, err,
    dir)."""
    status, out, err = run_cli(capsys, "--log_dir", FIXTURE, "--output_dir",
                               tmp_path, "--no_plot")
    return status, out, err, tmp_path


def test_fixture_tree_result_json(fixture_result):
    status, out, err, outdir = fixture_result
    assert status == 0
    with open(outdir / "bz128_result.json") as f:
        data = json.load(f)
    # Printed too: DLPerf's JSON first, then the Markdown a person reads.
    printed, end = json.JSONDecoder().raw_decode(out)
    assert printed == data
    assert out[:end + 1] == (outdir / "bz128_result.json").read_text()
    assert out[end + 1:] == "\n" + (outdir / "bz128_result.md").read_text()
    assert list(data) == ["rn50"] and list(data["rn50"]) == ["1n1g", "1n2g",
                                                             "2n2g"]
    dlperf = {case: {k: e[k] for k in ("average_speed", "median_speed",
                                         "speedup", "batch_size_per_device")}
              for case, e in data["rn50"].items()}
    assert dlperf == {
        "1n1g": {"average_speed": 320.0, "median_speed": 320.0, "speedup": 1.0,
                 "batch_size_per_device": 128},
        "1n2g": {"average_speed": 615.0, "median_speed": 615.0,
                 "speedup": 1.92, "batch_size_per_device": 128},
        "2n2g": {"average_speed": 1190.0, "median_speed": 1190.0,
                 "speedup": 3.72, "batch_size_per_device": 128}}
    r = data["rn50"]
    assert r["1n2g"]["efficiency"] == pytest.approx(0.9609375, abs=1e-4)
    assert r["2n2g"]["efficiency"] == pytest.approx(0.9296875, abs=1e-4)
    assert r["2n2g"]["runs"] == [1200.0, 1180.0, 1190.0]
    assert [x["index"] for x in r["2n2g"]["excluded"]] == [2]
    assert r["2n2g"]["excluded"][0]["reason"].startswith("truncated")
    assert r["1n2g"]["excluded"][0]["reason"].startswith("crashed")
    assert "ResourceExhaustedError" in r["1n2g"]["excluded"][0]["reason"]
    assert r["1n1g"]["run_details"][0]["source"] == "result_json"
    assert r["1n1g"]["environment"]["gpu_names"] == ["Tesla V100-SXM2-16GB"]
    assert "skipped %s" % os.path.join(FIXTURE, "misc", "notes.log") in err
    assert "1n2g/rn50_b128_fp32_3.log: excluded: crashed" in err
    assert "2n2g/rn50_b128_fp32_2.log: excluded: truncated" in err


def test_fixture_tree_markdown_and_csv(fixture_result):
    outdir = fixture_result[3]
    md = (outdir / "bz128_result.md").read_text()
    lines = md.splitlines()
    # the fixture's 1n1g has a result JSON: what was measured, then the table
    assert lines[2] == ("Measured: ResNet-50 v1.5 (by the log names), GPU: "
                        "Tesla V100-SXM2-16GB; not recorded for the cases "
                        "without a result JSON")
    assert lines.index("## rn50 (fp32, batch 128 per device)") == 6
    assert ("| node_num | gpu_num | samples/s | speedup | efficiency |"
            in lines[8])
    assert ("| 1 | 2 | 615.00 | 1.92 | 96.09% | 307.50 | 2 (+1 excluded) |"
            in md)
    assert ("| 2 | 4 | 1190.00 | 3.72 | 92.97% | 297.50 | 3 (+1 excluded) |"
            in md)
    assert "excluded 2n2g/rn50_b128_fp32_2.log: truncated" in md
    assert "TensorFlow 2.21.0" in md and "1 x Tesla V100-SXM2-16GB" in md
    rows = list(csv.DictReader(
        io.StringIO((outdir / "bz128_result.csv").read_text())))
    assert [(r["num_nodes"], r["num_devices"], r["median_speed"], r["speedup"],
             r["num_excluded"]) for r in rows] == [
        ("1", "1", "320.0", "1.0", "0"), ("1", "2", "615.0", "1.92", "1"),
        ("2", "4", "1190.0", "3.72", "1")]
    assert not (outdir / "bz128_result.png").exists()  # --no_plot


def test_json_only_prints_dlperfs_json_alone(tmp_path, capsys):
    status, out, _ = run_cli(capsys, "--log_dir", FIXTURE, "--output_dir",
                             tmp_path, "--no_plot", "--json_only")
    assert status == 0
    assert out == (tmp_path / "bz128_result.json").read_text()
    assert "| node_num |" not in out


def test_time_method_on_the_fixture(tmp_path, capsys):
    # Clock times advance by each interval's true duration, so a run's
    # time-based speed is the harmonic mean of its counted speeds.
    status, out, _ = run_cli(capsys, "--log_dir", FIXTURE, "--output_dir",
                             tmp_path, "--method", "time", "--no_plot",
                             "--json_only")
    assert status == 0
    r = json.loads(out)["rn50"]
    hm = statistics.harmonic_mean
    one = [hm([300, 310, 320, 330, 340]), 310.0, 330.0]
    two = [hm([600, 620, 640, 600, 640]), 610.0]
    assert r["1n1g"]["runs"] == pytest.approx(one, abs=0.01)
    assert r["1n1g"]["median_speed"] == pytest.approx(statistics.median(one),
                                                      abs=0.01)
    assert r["1n2g"]["median_speed"] == pytest.approx(statistics.median(two),
                                                      abs=0.01)
    assert r["1n2g"]["method"] == "time"
    assert r["1n1g"]["run_details"][0]["source"] == "log"


def test_trailing_slash_and_name(tmp_path, capsys):
    status, _, _ = run_cli(capsys, "--log_dir", FIXTURE + os.sep,
                           "--output_dir", tmp_path, "--no_plot",
                           "--no_markdown", "--no_csv")
    assert status == 0
    assert sorted(os.listdir(tmp_path)) == ["bz128_result.json"]


def test_mixed_dtypes_and_multi_digit_cases(tmp_path):
    logs = tmp_path / "mixed"
    # fp32: 1n1g at 300, 1n16g at 4000 -> speedup 13.33, efficiency 0.8333
    kit.write_run(logs, "1n1g", [50] + [300] * 6, dtype="fp32")
    kit.write_run(logs, "1n16g", [50] + [4000] * 6, dtype="fp32")
    # fp16: 1n1g at 1000, 10n8g at 60000 -> speedup 60, efficiency 0.75
    kit.write_run(logs, "1n1g", [50] + [1000] * 6, dtype="fp16")
    kit.write_run(logs, "10n8g", [50] + [60000] * 6, dtype="fp16", index=2)
    result = extract.extract(str(logs)).result
    assert list(result) == ["rn50_fp32", "rn50_fp16"]
    assert list(result["rn50_fp32"]) == ["1n1g", "1n16g"]
    assert list(result["rn50_fp16"]) == ["1n1g", "10n8g"]
    fp32, fp16 = result["rn50_fp32"]["1n16g"], result["rn50_fp16"]["10n8g"]
    assert (fp32["median_speed"], fp32["speedup"], fp32["efficiency"]) == \
        (4000.0, 13.33, 0.8333)
    assert (fp16["median_speed"], fp16["speedup"], fp16["efficiency"]) == \
        (60000.0, 60.0, 0.75)
    assert (fp16["num_nodes"], fp16["num_gpus_per_node"], fp16["dtype"]) == \
        (10, 8, "fp16")


def test_malformed_result_json_falls_back_to_the_log(tmp_path):
    logs = tmp_path / "bz64"
    path = kit.write_run(logs, "1n1g", [50, 200, 200, 200, 200, 300], batch=64)
    kit.write_json(path[:-4] + ".json",
                   '{"schema": "official_bench.result/1", ')
    ex = extract.extract(str(logs))
    assert ex.result["rn50"]["1n1g"]["median_speed"] == 220.0  # from the log
    assert ex.result["rn50"]["1n1g"]["run_details"][0]["source"] == "log"
    assert any(path[:-4] + ".json: unusable result JSON" in w
               for w in ex.warnings)


def test_result_json_numbers_are_used_when_present(tmp_path):
    logs = tmp_path / "bz64"
    speeds = [50, 200, 200, 200, 200, 200]
    path = kit.write_run(logs, "1n1g", speeds, batch=64)
    unrounded = [50, 200.004, 200.004, 200.004, 200.004, 200.004]
    kit.write_json(path[:-4] + ".json", kit.result_json(
        [(k * 100, k * 100 + 100, e) for k, e in enumerate(unrounded)], 64, 1))
    ex = extract.extract(str(logs))
    e = ex.result["rn50"]["1n1g"]
    assert e["run_details"][0]["source"] == "result_json"
    assert ex.outcomes[0].speed == pytest.approx(200.004)
    assert e["environment"]["tensorflow"] == "2.21.0"


# ---- bad input --------------------------------------------------------------

def test_missing_directory(tmp_path, capsys):
    missing = tmp_path / "nope"
    status, out, err = run_cli(capsys, "--log_dir", missing)
    assert status == 1 and out == ""
    assert "error: log directory %s does not exist" % missing in err


def test_directory_without_logs(tmp_path, capsys):
    (tmp_path / "1n1g").mkdir()
    kit.write_lines(str(tmp_path / "1n1g" / "train.log"), ["x"])
    status, _, err = run_cli(capsys, "--log_dir", tmp_path, "--output_dir",
                             tmp_path / "out")
    assert status == 1
    assert ("no logs named {N}n{G}g/rn50_b{B}_{fp32|fp16|bf16}_{i}.log "
            "under %s" % tmp_path) in err
    assert "train.log: file name is not" in err
    assert not (tmp_path / "out").exists()


def test_a_log_dir_root_names_the_log_trees_below_it(tmp_path, capsys):
    """--log_dir LOG_DIR (the run scripts' root, not its bz tree): the
    error names the trees below it; compare's side error does too."""
    from official_bench.judge import compare
    tree = tmp_path / "tensorflow" / "resnet50" / "bz16"
    kit.write_run(tree, "1n1g", [10, 20], batch=16)
    status, _, err = run_cli(capsys, "--log_dir", tmp_path)
    assert status == 1
    assert f"under {tmp_path}; the log trees below it: {tree} (give one " \
        "of them)" in err, err
    with pytest.raises(ExtractError) as e:
        compare.read_side(str(tmp_path))
    assert str(e.value).endswith(f"nor result.json files; the log trees "
                                 f"below it: {tree} (give one of them)")


def test_a_case_folder_names_its_log_tree(tmp_path, capsys,
                                         monkeypatch):
    """--log_dir .../bz16/1n1g (a case, not its tree): the error names the
    tree to give, also for a relative path and a trailing slash."""
    tree = tmp_path / "bz16"
    kit.write_run(tree, "1n1g", [10, 20], batch=16)
    status, _, err = run_cli(capsys, "--log_dir", tree / "1n1g")
    assert status == 1
    assert (f"under {tree / '1n1g'}; 1n1g is a case folder of the log tree "
            f"{tree} (give {tree})") in err, err
    monkeypatch.chdir(tree)
    status, _, err = run_cli(capsys, "--log_dir", "1n1g/")
    assert status == 1
    assert "; 1n1g is a case folder of the log tree . (give .)" in err, err


def test_all_runs_excluded(tmp_path, capsys):
    kit.write_run(tmp_path, "1n1g", [10, 20], finished=False)
    kit.write_lines(kit.log_path(tmp_path, "1n8g"),
                    ["no throughput here", "official_bench: run finished"])
    status, _, err = run_cli(capsys, "--log_dir", tmp_path, "--output_dir",
                             tmp_path / "out")
    assert status == 1
    assert "no usable run under %s (2 log(s), all excluded)" % tmp_path in err
    assert "1n1g/rn50_b128_fp32_1.log: excluded: truncated" in err
    assert "1n8g/rn50_b128_fp32_1.log: excluded: no TimeHistory lines" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv,message", [
    (["--warmup_batches", "600"], "train_batches (600, DLPerf's default: "
                                  "give --train_batches) must be greater "
                                  "than warmup_batches (600)"),
    (["--warmup_batches", "-1"], "warmup_batches is -1, must be >= 0"),
    (["--train_batches", "50"], "train_batches (50) must be greater than "
                                "warmup_batches (100, DLPerf's default: "
                                "give --warmup_batches)"),
    (["--spread_warn", "-2"], "spread_warn is -2, must be >= 0"),
])
def test_bad_option_values(capsys, argv, message):
    # A flag error: exit 2, one line naming it (docs/exit_status.md).
    status, _, err = run_cli(capsys, "--log_dir", FIXTURE, *argv)
    assert status == exit_status.CONFIG and message in err
    assert err.count("\n") == 1, err


def test_usage_errors(capsys):
    status, _, err = run_cli(capsys)
    assert status == 2 and "--log_dir is required" in err
    assert err.count("\n") == 1, err
    status, _, err = run_cli(capsys, "--log_dir", FIXTURE, "--method",
                             "median")
    assert status == 2 and "choose from 'mean', 'time'" in err
    status, _, err = run_cli(capsys, "--log_dir", FIXTURE, "--plot",
                             "--no_plot")
    assert status == 2


def test_help_explains_the_flags(capsys):
    status, out, _ = run_cli(capsys, "--help")
    assert status == 0
    for flag in ("--log_dir", "--output_dir", "--warmup_batches",
                 "--train_batches", "--method", "--compare", "--spread_warn",
                 "--plot", "default: 100"):
        assert flag in out


def test_dlperfs_batch_size_per_device_is_accepted_and_ignored(tmp_path,
                                                               capsys):
    # DLPerf's extractors defined it, unused (716bace..07f0bf7): its
    # command lines run unchanged, the batch still comes from the tree
    out_dir = tmp_path / "o"
    plain = run_cli(capsys, "--log_dir", FIXTURE, "--output_dir", out_dir,
                    "--no_plot", "--json_only")
    status, out, err = run_cli(capsys, "--log_dir", FIXTURE, "--output_dir",
                               out_dir, "--no_plot", "--json_only",
                               "--batch_size_per_device", "16")
    assert status == 0 and out == plain[1]
    assert ("note: --batch_size_per_device 16 is ignored, as in DLPerf's "
            "extractors: each log's batch per device comes from its name "
            "(rn50_b{B}_{dtype}_{i}.log)") in err
    assert json.loads(out)["rn50"]["1n1g"]["batch_size_per_device"] == 128


def test_library_raises_instead_of_exiting(tmp_path):
    with pytest.raises(ExtractError, match="does not exist"):
        extract.extract(str(tmp_path / "missing"))
    with pytest.raises(ExtractError,
                       match="method 'x' is not one of: mean, time"):
        extract.extract(FIXTURE, method="x")


# ---- running from anywhere, without TensorFlow ------------------------------

def test_wrapper_runs_from_any_directory_using_its_own_checkout(tmp_path):
    # Copy the wrapper and the package: an installed official_bench (the
    # editable install in .venv) must not be what the wrapper imports.
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copy(os.path.join(REPO, "extract_tensorflow_logs.py"), checkout)
    shutil.copytree(os.path.join(REPO, "official_bench"),
                    checkout / "official_bench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(checkout / "official_bench" / "extract" / "extractor.py",
              "a") as f:
        f.write("\nsys.stderr.write('extract module from the copy\\n')\n")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    proc = subprocess.run(
        [sys.executable, "-I", str(checkout / "extract_tensorflow_logs.py"),
         "--log_dir", FIXTURE, "--no_plot", "--json_only"],
        cwd=cwd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "extract module from the copy" in proc.stderr
    assert json.loads(proc.stdout)["rn50"]["1n2g"]["speedup"] == 1.92
    assert (cwd / "result" / "bz128_result.json").exists()  # default ./result


def test_extractor_does_not_import_tensorflow():
    code = ("import sys\n"
            "from official_bench.extract import extractor, tables, plot\n"
            "extractor.extract(%r)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'tf_keras', 'keras')))\n" % FIXTURE)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# ---- outputs: plot, atomic writes -------------------------------------------

def test_missing_matplotlib_is_a_note_unless_plot_is_required(tmp_path, capsys,
                                                             monkeypatch):
    # Every matplotlib module fails to import, including those an earlier
    # test in this process already loaded (sys.modules would serve them).
    for name in [m for m in sys.modules if m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    status, _, err = run_cli(capsys, "--log_dir", FIXTURE, "--output_dir",
                             tmp_path)
    assert status == 0
    assert "note: no plot: matplotlib is not installed" in err
    assert not (tmp_path / "bz128_result.png").exists()
    status, _, err = run_cli(capsys, "--log_dir", FIXTURE, "--output_dir",
                             tmp_path, "--plot")
    assert status == 1 and "--plot needs matplotlib" in err


def test_plot_is_a_valid_png(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="matplotlib (the [plot] extra) "
                        "is not installed")
    from matplotlib import image

    status, _, err = run_cli(capsys, "--log_dir", FIXTURE, "--output_dir",
                             tmp_path, "--plot")
    assert status == 0, err
    path = tmp_path / "bz128_result.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = image.imread(str(path))
    # 11 x 8.5 inches at 100 dpi: scaling panels on top, intervals below
    assert pixels.shape[:2] == (850, 1100)
    assert pixels[:425].std() > 0 and pixels[425:].std() > 0  # both drawn
    assert "wrote %s" % path in err


def test_plot_of_several_sections():
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    from official_bench.extract import plot

    result = {"rn50_fp32": {"1n2g": {"median_speed": 600.0, "speedup": 1.0,
                                     "speedup_baseline": "1n2g"},
                            "1n4g": {"median_speed": 1100.0, "speedup": 1.83,
                                     "speedup_baseline": "1n2g"}},
              "rn50_fp16": {"1n1g": {"median_speed": 1000.0, "speedup": 1.0},
                            "1n8g": {"median_speed": None, "speedup": None}}}
    assert plot.png_bytes(result, "t")[:4] == b"\x89PNG"


def _temp_files(directory):
    return [n for n in os.listdir(directory) if n.endswith(".tmp")]


def test_outputs_leave_no_temp_files_and_normal_permissions(fixture_result):
    outdir = fixture_result[3]
    assert _temp_files(outdir) == []
    mask = os.umask(0)
    os.umask(mask)
    mode = os.stat(outdir / "bz128_result.json").st_mode & 0o777
    assert mode == 0o666 & ~mask


def test_failed_write_keeps_the_previous_result(tmp_path, capsys, monkeypatch):
    target = tmp_path / "bz128_result.json"
    target.write_text("previous result\n")

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", broken_fsync)
    status, _, err = run_cli(capsys, "--log_dir", FIXTURE, "--output_dir",
                             tmp_path, "--no_plot")
    assert status == exit_status.NOT_WRITABLE
    assert err.splitlines()[-1].startswith(
        f"error: cannot write the extractor's results to {tmp_path}: no "
        "space left on the device (")
    assert target.read_text() == "previous result\n"
    assert _temp_files(tmp_path) == []


def test_output_dir_under_a_broken_link_names_the_link(tmp_path, capsys):
    """A scratch link whose target is gone: exit 5 naming the link (was
    exit 1 with a raw errno)."""
    link = tmp_path / "scratch"
    link.symlink_to(tmp_path / "not-mounted")
    status, _, err = run_cli(capsys, "--log_dir", FIXTURE, "--output_dir",
                             link / "res", "--no_plot")
    assert status == exit_status.NOT_WRITABLE
    assert err.splitlines()[-1] == (
        f"error: cannot write the extractor's results to {link / 'res'}: "
        f"{link} is a broken symbolic link (to {tmp_path / 'not-mounted'})")


# ---- --compare --------------------------------------------------------------

DLPERF_FP32 = {"rn50": {
    "1n1g": {"average_speed": 321.8, "median_speed": 321.8, "speedup": 1.0,
             "batch_size_per_device": 128},
    "1n8g": {"average_speed": 2458.74, "median_speed": 2458.74,
             "speedup": 7.64, "batch_size_per_device": 128},
    "4n8g": {"average_speed": 9418.44, "median_speed": 9418.44,
             "speedup": 29.27, "batch_size_per_device": 128}}}
DLPERF_FP16 = {"rn50": {
    "1n1g": {"average_speed": 1075.27, "median_speed": 1075.27, "speedup": 1.0,
             "batch_size_per_device": 256},
    "1n8g": {"average_speed": 6898.0, "median_speed": 6898.0, "speedup": 6.42,
             "batch_size_per_device": 256}}}


def _write_results(tmp_path, a, b, name_a="bz128_result.json",
                   name_b="bz256_result.json"):
    pa, pb = tmp_path / name_a, tmp_path / name_b
    pa.parent.mkdir(parents=True, exist_ok=True)
    pb.parent.mkdir(parents=True, exist_ok=True)
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    return pa, pb


def test_compare_side_by_side(tmp_path, capsys):
    pa, pb = _write_results(tmp_path, DLPERF_FP32, DLPERF_FP16)
    status, out, err = run_cli(capsys, "--compare", pa, pb, "--output_dir",
                               tmp_path / "cmp")
    assert status == 0, err
    # ratios by hand: 1075.27/321.8 = 3.341, 6898/2458.74 = 2.805
    assert "| node_num | gpu_num | bz128 samples/s | bz128 speedup | " \
           "bz256 samples/s | bz256 speedup | bz256 / bz128 |" in out
    assert "| 1 | 1 | 321.80 | 1.00 | 1075.27 | 1.00 | 3.34 |" in out
    assert "| 1 | 8 | 2458.74 | 7.64 | 6898.00 | 6.42 | 2.81 |" in out
    assert "| 4 | 32 | 9418.44 | 29.27 | n/a | n/a | n/a |" in out
    assert (tmp_path / "cmp" / "compare_bz128_vs_bz256.md").read_text() == out
    rows = list(csv.DictReader(io.StringIO(
        (tmp_path / "cmp" / "compare_bz128_vs_bz256.csv").read_text())))
    assert [r["ratio_b_over_a"] for r in rows] == ["3.34", "2.81", ""]
    assert rows[0]["model_a"] == "bz128:rn50"


def test_compare_labels_for_equal_file_names(tmp_path, capsys):
    pa, pb = _write_results(tmp_path, DLPERF_FP32, DLPERF_FP32,
                            "tf2.3/bz128_result.json",
                            "tf2.21/bz128_result.json")
    status, out, _ = run_cli(capsys, "--compare", pa, pb, "--no_csv",
                             "--no_markdown")
    assert status == 0
    assert "tf2.21/bz128 / tf2.3/bz128 |" in out
    assert "| 1 | 8 | 2458.74 | 7.64 | 2458.74 | 7.64 | 1.00 |" in out


def test_compare_mixed_dtype_files_pair_sections_by_key(tmp_path):
    a = {"rn50_fp32": DLPERF_FP32["rn50"], "rn50_fp16": DLPERF_FP16["rn50"]}
    b = {"rn50_fp16": DLPERF_FP16["rn50"], "rn50_bf16": DLPERF_FP16["rn50"]}
    text = tables.compare_markdown(a, b, "old", "new")
    assert "## rn50_fp16 (batch 256 per device) vs rn50_fp16" in text
    assert "not compared (only in one file): A:rn50_fp32, B:rn50_bf16" in text


@pytest.mark.parametrize("content,message", [
    (None, "cannot read result file"),
    ("{not json", "is not valid JSON"),
    ("[]", "expected {\"rn50\""),
    ('{"rn50": {"8gpus": {"median_speed": 1}}}', "case key '8gpus'"),
    ('{"rn50": {"1n1g": {"speed": 1}}}', "rn50/1n1g has no median_speed"),
    # a speed that is not a number (it failed in the table with TypeError)
    ('{"rn50": {"1n1g": {"median_speed": "x", "average_speed": 1, '
     '"speedup": 1}}}', 'rn50/1n1g median_speed is "x", expected a finite '
     'number or null'),
    ('{"rn50": {"1n1g": {"median_speed": 1, "speedup": NaN}}}',
     "rn50/1n1g speedup is NaN"),
    ('{"rn50": {"1n1g": {"median_speed": 1, "average_speed": true}}}',
     "rn50/1n1g average_speed is true"),
])
def test_compare_bad_files(tmp_path, capsys, content, message):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(DLPERF_FP32))
    bad = tmp_path / "bad_result.json"
    if content is not None:
        bad.write_text(content)
    status, _, err = run_cli(capsys, "--compare", good, bad)
    assert status == 1
    assert str(bad) in err and message in err
    assert "Traceback" not in err


def test_compare_null_speeds_read_as_n_a(tmp_path, capsys):
    b = {"rn50": {"1n1g": {"median_speed": None, "average_speed": None,
                           "speedup": None}}}
    pa, pb = _write_results(tmp_path, DLPERF_FP32, b)
    status, out, err = run_cli(capsys, "--compare", pa, pb, "--no_csv",
                               "--no_markdown")
    assert status == 0, err
    assert "| 1 | 1 | 321.80 | 1.00 | n/a | n/a | n/a |" in out


def test_compare_without_common_sections(tmp_path, capsys):
    pa, pb = _write_results(tmp_path, {"rn50_fp32": DLPERF_FP32["rn50"],
                                       "rn50_fp16": DLPERF_FP16["rn50"]},
                            {"rn50_bf16": DLPERF_FP16["rn50"],
                             "rn50_b64_fp32": DLPERF_FP16["rn50"]})
    status, _, err = run_cli(capsys, "--compare", pa, pb)
    assert status == 1 and "nothing to compare" in err


def test_markdown_of_a_dlperf_result_file():
    md = tables.markdown_report(DLPERF_FP32, "bz128")
    assert "| 4 | 32 | 9418.44 | 29.27 | n/a | n/a | n/a | n/a |" in md


def test_run_the_launcher_saw_fail_is_never_counted(tmp_path):
    """A complete-looking log whose trainer was SIGKILLed at its last step:
    the launcher's status record excludes it; a log without a record (as
    DLPerf's trees) keeps the log rules; an 'ok' record counts."""
    from official_bench.contracts import run_status
    logs = tmp_path / "bz128"
    good = kit.write_run(logs, "1n1g", [50] + [300] * 6, index=1)
    killed = kit.write_run(logs, "1n1g", [50] + [900] * 6, index=2)
    kit.write_run(logs, "1n1g", [50] + [310] * 6, index=3)  # no record
    times = dict(started=1.0, ended=2.0, node=0, host="h")
    run_status.write_status(good, status="ok", rc=0, reason="", **times)
    run_status.write_status(killed, status="failed", rc=137,
                            reason="killed (SIGKILL)", **times)
    out = extract.extract(str(logs))
    case = out.result["rn50"]["1n1g"]
    assert case["median_speed"] == 305.0  # 300 and 310; 900 left out
    reasons = [r for r in out.excluded if "rn50_b128_fp32_2.log" in str(r)]
    assert reasons and "the launcher saw this run failed (exit 137, SIGKILL)" \
        in str(reasons[0])


def test_short_runs_get_the_window_that_counts_them(tmp_path):
    """Runs of 30 steps (a CPU try) are outside DLPerf's 100-600: the error
    names the window every run covers after its warm-up interval and the
    flags that count it, and those flags then extract them."""
    for index, speeds in ((1, [50.0, 100.0, 104.0]), (2, [40.0, 98.0])):
        kit.write_run(tmp_path, "1n1g", speeds, batch=16, index=index,
                      log_steps=10)
    with pytest.raises(ExtractError) as e:
        extract.extract(str(tmp_path))
    assert str(e.value).endswith(
        "the runs cover steps 10-20 after their first (warm-up) interval: "
        "count them with --warmup_batches 10 --train_batches 20 (or "
        "--window auto)")
    case = extract.extract(str(tmp_path), warmup_batches=10,
                           train_batches=20).result["rn50"]["1n1g"]
    assert case["runs"] == [100.0, 98.0]
