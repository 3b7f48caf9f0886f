"""benchmarks/ab_winner.py: the one candidate an A/B judged faster by the
widest margin, on top of the base, as the run script's batch and
override; both drivers' ab.json; the base alone where none won; a file
it cannot read is one line and exit 1."""

import json

import pytest

from support.helpers import load_script

BASE = "train_dataset.batch_size=512,model.model_params.bn_statistics=one_pass"


@pytest.fixture(scope="module")
def winner():
    return load_script("benchmarks", "ab_winner.py")


def _verdict(ratio, verdict):
    return {"median_a": 100.0, "median_b": 100.0 * ratio, "ratio": ratio,
            "low": ratio - 0.004, "high": ratio + 0.004, "level": 0.95,
            "runs_a": 8, "runs_b": 8, "intervals_a": 8, "intervals_b": 8,
            "verdict": verdict}


def _step_doc(*rows, base=BASE):
    """An ab.json as jax_step_ab.py writes it."""
    return {"base": base, "rows": [
        {"dtype": dtype, "candidate": name, "override": override,
         "verdict": _verdict(ratio, verdict) if verdict else None,
         "failure": None if verdict else "it did not compile"}
        for dtype, name, override, ratio, verdict in rows]}


def _run(winner, capsys, tmp_path, doc, *args):
    path = tmp_path / "ab.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    rc = winner.main([str(path), *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_widest_faster_margin_wins_in_its_precision(winner, capsys,
                                                         tmp_path):
    doc = _step_doc(
        ("fp16", "ls_select", "runtime.loss_scale_update=select", 1.010,
         "faster"),
        ("fp16", "bn_vjp_relu", "model.model_params.bn_backward=vjp_relu",
         1.031, "faster"),
        ("fp16", "bn_vjp", "model.model_params.bn_backward=vjp", 1.060,
         "no difference measurable at this spread"),
        ("fp16", "bn_pallas", "model.model_params.bn_statistics=pallas",
         0.990, None),
        ("bf16", "pad4", "model.model_params.pad_input_channels=4", 1.200,
         "faster"))
    rc, out, err = _run(winner, capsys, tmp_path, doc, "--dtype", "fp16")
    assert rc == 0, err
    # the batch comes out of the override: the run script takes it apart
    assert out == ("512 model.model_params.bn_statistics=one_pass,"
                   "model.model_params.bn_backward=vjp_relu\n")
    assert err == ("ab_winner: fp16: winner bn_vjp_relu (model.model_params."
                   "bn_backward=vjp_relu): B/A 1.031 [1.027, 1.035], "
                   "faster, of 3 judged\n")
    rc, out, _ = _run(winner, capsys, tmp_path, doc, "--dtype", "bf16")
    assert out == ("512 model.model_params.bn_statistics=one_pass,"
                   "model.model_params.pad_input_channels=4\n")


def test_a_key_the_winner_sets_replaces_the_bases(winner, capsys, tmp_path):
    doc = _step_doc(("fp16", "bn_pallas",
                     "model.model_params.bn_statistics=pallas", 1.02,
                     "faster"))
    _, out, _ = _run(winner, capsys, tmp_path, doc)
    assert out == "512 model.model_params.bn_statistics=pallas\n"


def test_a_winner_that_sets_the_batch_gives_it(winner, capsys, tmp_path):
    doc = {"base": "", "verdicts": [  # jax_speed_ab.py's flat form
        dict(_verdict(1.05, "faster"), dtype="fp16", candidate="b400",
             override="train_dataset.batch_size=400", failure=None),
        {"dtype": "fp16", "candidate": "conv_fusion", "failure": "exit 1",
         "override": "runtime.xla_flags=['--x=true']"}]}
    rc, out, err = _run(winner, capsys, tmp_path, doc)
    assert (rc, out) == (0, "400 \n"), err
    assert "winner b400" in err and "of 1 judged" in err


def test_none_faster_gives_the_base_alone(winner, capsys, tmp_path):
    doc = _step_doc(("fp16", "ls_select", "runtime.loss_scale_update=select",
                     0.98, "slower"))
    rc, out, err = _run(winner, capsys, tmp_path, doc)
    assert (rc, out) == (0, "512 model.model_params.bn_statistics=one_pass\n")
    assert "no candidate of 1 judged faster; the base alone" in err
    # --base wins over the file's; without a file, the base split
    rc, out, _ = _run(winner, capsys, tmp_path, doc, "--base", "a.b=1")
    assert out == "256 a.b=1\n"
    assert winner.main(["--base", BASE]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("512 model.model_params.bn_statistics=one_pass\n",
                          "")


@pytest.mark.parametrize("text, problem", [
    ("{not json", "Expecting property name"),
    ('{"base": ""}', "has neither 'rows' (jax_step_ab.py) nor 'verdicts'"),
    ('{"rows": [{"dtype": "fp16", "verdict": {"ratio": 1}}]}',
     "no key 'candidate'"),
])
def test_a_file_it_cannot_read_is_one_line(winner, capsys, tmp_path, text,
                                           problem):
    rc, out, err = _run(winner, capsys, tmp_path, text)
    assert (rc, out) == (1, "")
    assert err.startswith(f"ab_winner: {tmp_path / 'ab.json'}: ")
    assert problem in err and err.count("\n") == 1
    assert winner.main([str(tmp_path / "none.json")]) == 1
    assert "No such file" in capsys.readouterr().err
