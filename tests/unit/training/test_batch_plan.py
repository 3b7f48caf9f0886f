"""training/batch_plan.py: the steps a run trains and evaluates, which the
interval clock's progress and the cosine schedule's length are read from."""

from official_bench import config as C
from official_bench.training.batch_plan import batch_plan
from support.helpers import tiny


def test_total_steps_are_every_epoch_s_steps():
    # 3 epochs of 6 steps, evaluating every 2 epochs and after the last;
    # tiny()'s 8 images per replica on 2 replicas: global batch 16.
    cfg = C.load_config(tiny(train={"epochs": 3, "steps": 6},
                             evaluation={"epochs_between_evals": 2}))
    plan = batch_plan(cfg, 2)
    assert (plan.global_batch, plan.steps_per_epoch, plan.total_steps) == \
        (16, 6, 18)
    assert plan.eval_epochs == [2, 3]
