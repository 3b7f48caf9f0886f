"""Run by tests/system/test_horovod.py in the Horovod venv (PYTHONPATH from
support.helpers.horovod_env), one process (hvd.init()
works alone with Gloo).

Trains and evaluates a tiny model through trainer.run with
distribution_strategy horovod, checkpoints, export and TensorBoard on (rank
0's callbacks are a superset of the other ranks'), and records every
CallbackList that model.fit builds (the test also reads the run's
result.json and SavedModel: the package on the venv's TensorFlow). Prints
one JSON line: for the fit's list, the callbacks and whether tf-keras will
convert each batch's logs to numpy; and the same for that list plus
Horovod's BroadcastGlobalVariablesCallback, which is what the check exists
to catch.
"""
import json
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from official_bench import trainer  # noqa: E402
from official_bench.runtime.keras_setup import keras  # noqa: E402
from support.callback_logs import forces_numpy_batch_logs  # noqa: E402
from support.helpers import TINY_OVERRIDE  # noqa: E402


def main(model_dir):
    built = []
    original = keras.callbacks.CallbackList.__init__

    def recording_init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        built.append(self)

    keras.callbacks.CallbackList.__init__ = recording_init
    trainer.run(params_override=TINY_OVERRIDE + ",train.steps=4,"
                "runtime.distribution_strategy=horovod,"
                "train.callbacks.enable_checkpoint_and_export=true,"
                "train.callbacks.enable_tensorboard=true,"
                "evaluation.skip_eval=false,evaluation.steps=1",
                model_dir=model_dir, mode="train_and_eval")
    keras.callbacks.CallbackList.__init__ = original
    fit_lists = [c for c in built if c._history is not None]
    assert len(fit_lists) == 1, [c.callbacks for c in built]
    fit = fit_lists[0]
    import horovod.tensorflow.keras as hvd
    with_bcast = keras.callbacks.CallbackList(
        fit.callbacks + [hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    print("CALLBACKS " + json.dumps({
        "names": [type(c).__name__ for c in fit.callbacks],
        "forces_numpy": forces_numpy_batch_logs(fit),
        "calls_batch_hooks": bool(fit._should_call_train_batch_hooks),
        "with_broadcast_callback_forces_numpy":
            forces_numpy_batch_logs(with_bcast)}),
        flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
