"""Training pieces the trainer's steps are made of.

    setup.py        steps 1-4 of a run: runtime, strategy, batch plan, model
                    and compile
    schedules.py    learning-rate schedules with linear warm-up
    optimizers.py   `model.optimizer` -> a tf-keras optimizer
    objectives.py   the loss (label smoothing), top-1 / top-5 metrics
    checkpoints.py  checkpoints, resume, SavedModel export, TensorBoard
    nan_guard.py    stops a run whose loss becomes NaN or infinite
    run_history.py  the trainer's one write to the run history
"""
