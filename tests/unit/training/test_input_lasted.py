"""A training input that runs out before train.steps ends the run with one
line naming the source, instead of a result for fewer steps than asked
(tf-keras only warns 'Your input ran out of data' and returns)."""

import pytest

from official_bench import trainer
from official_bench.training import tf_trainer
from support.helpers import tiny


def test_a_python_source_that_ends_early_fails_naming_it(tmp_path):
    cfg = tiny(train_dataset={
        "builder": "python",
        "python_source": "support.python_sources:two_batch_source"},
        train={"steps": 6})
    cfg["model_dir"] = str(tmp_path)
    with pytest.raises(tf_trainer.InputExhausted) as e:
        trainer.run(cfg)
    assert str(e.value).startswith(
        "official_bench: the training input ran out after step 2 of 6 "
        "(train_dataset.builder python, python_source "
        "support.python_sources:two_batch_source)")
    assert not (tmp_path / "result.json").exists()
