"""Run under `horovodrun -np 2 --gloo` by tests/system/test_horovod.py.

For the new and the legacy tf-keras SGD, each with and without a
LossScaleOptimizer around Horovod's DistributedOptimizer:
  1. models start different on each rank (different seeds) and optimizer
     slots hold rank-dependent values;
  2. horovod_backend.broadcast_initial_state makes model and optimizer
     variables equal to rank 0's on every rank;
  3. two steps of the XLA gradient step (install_xla_gradient_step) on
     different data per rank leave the trainable weights equal on all ranks
     and different from the start.
Prints "RANKS OK <kind>" per case on rank 0; raises on any failure.
"""
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import horovod.tensorflow as hvd_tf  # noqa: E402
import horovod.tensorflow.keras as hvd  # noqa: E402
import numpy as np  # noqa: E402

from official_bench.runtime import horovod_backend  # noqa: E402
from official_bench.runtime.keras_setup import keras, tf  # noqa: E402


def _digests(variables):
    local = horovod_backend.weights_digest(variables)
    return list(hvd_tf.allgather_object(local))


def _model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([
        keras.layers.Dense(6, input_shape=(8,)),
        keras.layers.BatchNormalization(),
        keras.layers.Dense(3)])


def _optimizer(kind):
    legacy = kind.startswith("legacy")
    sgd = (keras.optimizers.legacy.SGD if legacy else keras.optimizers.SGD)(
        0.1, momentum=0.9)
    opt = horovod_backend.distributed_optimizer(hvd, sgd, fp16_allreduce=False)
    if kind.endswith("+lso"):
        opt = keras.mixed_precision.LossScaleOptimizer(opt)
    return opt


def check(kind):
    rank = hvd.rank()
    model = _model(100 + rank)
    model.compile(optimizer=_optimizer(kind), jit_compile=True,
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True))
    with tf.init_scope():
        horovod_backend.build_optimizer_slots(model.optimizer,
                                              model.trainable_variables)
    opt_vars = horovod_backend.optimizer_variables(model.optimizer)
    slots = [v for v in opt_vars if v.dtype == tf.float32 and
             v.shape.rank and v.shape.rank > 0]
    assert len(slots) >= len(model.trainable_variables), (kind, opt_vars)
    for v in slots:
        v.assign(tf.fill(v.shape, float(rank + 1)))
    before = _digests(model.trainable_variables)
    assert before[0] != before[1], f"{kind}: ranks already equal: {before}"
    assert _digests(slots)[0] != _digests(slots)[1], kind

    horovod_backend.broadcast_initial_state(hvd, model)
    after = _digests(model.variables)
    assert after[0] == after[1], f"{kind}: differ after broadcast: {after}"
    assert _digests(slots)[0] == _digests(slots)[1], kind
    assert all(np.all(v.numpy() == 1.0) for v in slots), \
        f"{kind}: slots are not rank 0's"

    horovod_backend.install_xla_gradient_step(model)
    rng = np.random.default_rng(rank)
    x = rng.normal(size=(8, 8)).astype("float32")
    y = rng.integers(0, 3, size=(8,))
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
    trained = _digests(model.trainable_variables)
    assert trained[0] == trained[1], f"{kind}: differ after steps: {trained}"
    assert trained[0] != after[0], f"{kind}: weights did not change"
    if rank == 0:
        print(f"RANKS OK {kind}", flush=True)


def main():
    hvd.init()
    assert hvd.size() == 2, hvd.size()
    for kind in sys.argv[1:]:
        keras.backend.clear_session()
        check(kind)


if __name__ == "__main__":
    main()
