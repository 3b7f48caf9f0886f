"""Tiny Horovod smoke test: 2+ processes, CPU, Gloo, tf-keras.

Run it through horovodrun from the Horovod venv (scripts/install_horovod.sh
does this as its last step):

    horovodrun -np 2 -H localhost:2 --gloo python scripts/horovod_smoke.py

Checks, on every rank:
  1. hvd.allreduce(rank, Sum) == size*(size-1)/2;
  2. weights initialised differently on each rank become equal after
     hvd.broadcast_variables from rank 0;
  3. 3 training steps of a tiny Dense model with hvd.DistributedGradientTape
     on different data per rank change the weights and leave them identical
     on all ranks (allgather of a per-rank weight checksum).
Rank 0 prints one "horovod smoke OK" line; any failure exits non-zero with a
message naming the rank.
"""
import os

# Keras 3 does not work with Horovod: use tf-keras (Keras 2). This has to be
# set before TensorFlow is imported anywhere in the process.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import sys  # noqa: E402

import horovod  # noqa: E402
import horovod.tensorflow as hvd  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

STEPS = 3


def _fail(rank, msg):
    sys.stderr.write("horovod smoke FAILED on rank %d: %s\n" % (rank, msg))
    sys.stderr.flush()
    sys.exit(1)


def _checksum(variables):
    # float64 sum of all elements plus a position-weighted sum, so that two
    # different weight sets with the same plain sum are still told apart.
    total = 0.0
    for i, v in enumerate(variables):
        a = np.asarray(v.numpy(), dtype=np.float64).ravel()
        total += a.sum() + (i + 1) * np.dot(
            a, np.arange(1, a.size + 1, dtype=np.float64)) * 1e-3
    return total


def _gather_checksums(variables):
    local = tf.constant([_checksum(variables)], dtype=tf.float64)
    return hvd.allgather(local).numpy()


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    if size < 2:
        _fail(rank, "expected at least 2 processes, got size=%d "
                    "(run it with horovodrun -np 2)" % size)

    # 1. allreduce of the ranks.
    got = float(hvd.allreduce(tf.constant(float(rank)), op=hvd.Sum).numpy())
    want = size * (size - 1) / 2.0
    if got != want:
        _fail(rank, "allreduce(rank, Sum) = %r, expected %r" % (got, want))

    # 2. a tiny model, initialised differently on each rank on purpose.
    tf_keras.utils.set_random_seed(1000 + rank)
    model = tf_keras.Sequential([
        tf_keras.layers.Dense(4, activation="relu", input_shape=(8,)),
        tf_keras.layers.Dense(1),
    ])
    opt = tf_keras.optimizers.SGD(learning_rate=0.05 * size)

    before = _gather_checksums(model.variables)
    if np.allclose(before, before[0], rtol=0.0, atol=1e-9):
        _fail(rank, "initial weights are already equal on all ranks; the "
                    "broadcast check would prove nothing: %r" % (before,))
    hvd.broadcast_variables(model.variables, root_rank=0)
    after_bcast = _gather_checksums(model.variables)
    if not np.all(after_bcast == after_bcast[0]):
        _fail(rank, "weights differ after broadcast_variables: %r"
              % (after_bcast,))

    # 3. train on different data per rank with averaged gradients.
    rng = np.random.default_rng(rank)
    x = tf.constant(rng.normal(size=(16, 8)), dtype=tf.float32)
    y = tf.constant(rng.normal(size=(16, 1)), dtype=tf.float32)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    losses = []
    for step in range(STEPS):
        losses.append(float(train_step(x, y).numpy()))
        if step == 0:
            # Optimizer slots exist only after the first step (Horovod's
            # documented TF2 pattern); SGD has just the iteration counter.
            opt_vars = opt.variables
            opt_vars = opt_vars() if callable(opt_vars) else opt_vars
            hvd.broadcast_variables(opt_vars, root_rank=0)

    after = _gather_checksums(model.variables)
    if not np.all(after == after[0]):
        _fail(rank, "weights differ across ranks after %d steps: %r"
              % (STEPS, after))
    if after[0] == after_bcast[0]:
        _fail(rank, "weights did not change during training")

    print("rank %d/%d: losses %s, weight checksum %.10f"
          % (rank, size, ["%.4f" % v for v in losses], after[rank]),
          flush=True)
    if rank == 0:
        print("horovod smoke OK: horovod %s, tensorflow %s, tf_keras %s, "
              "size %d, allreduce sum %g, %d steps, weights equal on all ranks"
              % (horovod.__version__, tf.__version__, tf_keras.__version__,
                 size, got, STEPS), flush=True)


if __name__ == "__main__":
    main()
