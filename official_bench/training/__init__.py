"""Training pieces the trainers' steps are made of.

    tf_trainer.py   a run on the TensorFlow backend, top to bottom
    setup.py        its steps 1-4: runtime, strategy, batch plan, model and
                    compile
    run_result.py   what a run of either backend gives back
    batch_plan.py   global batch, steps and evaluation epochs (both backends)
    lr_math.py      the learning-rate schedules' arithmetic (both backends)
    schedules.py    those schedules as tf-keras schedule objects
    optimizers.py   `model.optimizer` -> an optimizer of either Keras
    objectives.py   the loss (label smoothing), top-1 / top-5 metrics
    checkpoints.py  checkpoints, resume, SavedModel export, TensorBoard
    nan_check.py    finds a NaN or infinite loss (both backends);
    nan_guard.py    the same as a tf-keras callback
    run_record.py   the files a run writes and result.json's record
    run_history.py  the trainer's one write to the run history
"""
