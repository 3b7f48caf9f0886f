"""The train and eval steps, each compiled once into one XLA program.

tf.distribute's MirroredStrategy semantics, as the TensorFlow backend
trains: under shard_map over the mesh's batch axis every replica runs the
forward and backward pass on its own shard, with its own batch-norm batch
statistics; the gradients are averaged across replicas (all-reduces XLA
can fuse), and so are the BN moving statistics (TensorFlow averages them
when they are read); the optimizer update then runs identically on every
replica. The state's buffers are donated, so a step updates them in
place. A step that float16's loss scaling skips still counts (the
schedule advances as tf-keras's does); `loss_scale_update: select`
applies or skips it without Keras' conditional (jax_backend/loss_scale.py).
Loss and accuracy are running sums on the devices for the epoch; nothing
is read back unless the host asks (the interval clock does, at interval
ends).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional

from jax.sharding import PartitionSpec as P

from official_bench.jax_backend import loss_scale
from official_bench.models import jax_axes

AXIS = "batch"  # keras.distribution.DataParallel's batch axis


@dataclasses.dataclass
class Steps:
    """The compiled steps and the state they carry between calls."""
    train: Callable  # (state, images, labels) -> (state, running loss)
    evaluate: Callable  # (trainable, non_trainable, images, labels) -> sums
    state: Dict[str, Any]


def initial_state(jax, model, optimizer) -> Dict[str, Any]:
    """The model's and optimizer's variable values, and zeroed sums."""
    return {"trainable": [v.value for v in model.trainable_variables],
            "non_trainable": [v.value for v in model.non_trainable_variables],
            "optimizer": [v.value for v in optimizer.variables],
            "sums": zero_sums(jax)}


def zero_sums(jax) -> Dict[str, Any]:
    """Per-epoch running sums: the loss, top-1 and top-5 hits, steps and
    images."""
    # One buffer each: the step donates them, and a buffer passed twice
    # cannot be donated.
    return {k: jax.numpy.zeros((), "float32")
            for k in ("loss", "top1", "top5", "steps", "images")}


def _hits(jnp, probs, labels, one_hot: bool, k: int):
    """How many of the shard's labels are among the top-k predictions."""
    target = jnp.argmax(labels, -1) if one_hot else labels.astype("int32")
    if k == 1:
        return jnp.sum(jnp.argmax(probs, -1) == target)
    import jax
    k = min(k, probs.shape[-1])
    top = jax.lax.top_k(probs.astype("float32"), k)[1]
    return jnp.sum(jnp.any(top == target[:, None], axis=-1))




def build(jax, keras, model, optimizer, loss_fn, mesh, one_hot: bool,
          loss_scale_update: str = "cond") -> Steps:
    """The train and eval steps for `model` on `mesh`, and their state;
    `loss_scale_update` (cond | select): how a loss-scaled optimizer
    applies or skips a step (jax_backend/loss_scale.py)."""
    jnp = jax.numpy
    lax = jax.lax

    def forward(trainable, non_trainable, images, labels, training):
        probs, non_trainable, losses = model.stateless_call(
            trainable, non_trainable, images, training=training,
            return_losses=True)
        loss = loss_fn(labels, probs) + sum(losses, jnp.zeros((), "float32"))
        return loss, (probs, non_trainable)

    def replica_train(state, images, labels):
        opt_vars = state["optimizer"]

        def scaled(trainable):
            loss, aux = forward(trainable, state["non_trainable"], images,
                                labels, True)
            mapping = list(zip(optimizer.variables, opt_vars))
            with keras.StatelessScope(state_mapping=mapping):
                scaled_loss = optimizer.scale_loss(loss) \
                    if hasattr(optimizer, "scale_loss") else loss
            return scaled_loss, (loss, aux)

        # Differentiated as this replica's own copy: the gradient of a
        # replicated input would come back summed over the replicas.
        grads, (loss, (probs, non_trainable)) = jax.grad(
            scaled, has_aux=True)(
                jax_axes.vary(jax, state["trainable"], (AXIS,)))
        grads = lax.pmean(grads, AXIS)
        non_trainable = lax.pmean(non_trainable, AXIS)
        new_trainable, new_opt_vars = loss_scale.stateless_apply(
            jax, optimizer, loss_scale_update, opt_vars, grads,
            state["trainable"])
        new_opt_vars = counted_step(new_opt_vars, opt_vars, counter)
        sums = _add(state["sums"], lax.pmean(loss, AXIS), probs, labels)
        new = {"trainable": new_trainable, "non_trainable": non_trainable,
               "optimizer": new_opt_vars, "sums": sums}
        return new, sums["loss"] / sums["steps"]

    def _add(sums, loss, probs, labels):
        n = jnp.asarray(probs.shape[0], "float32")
        return {"loss": sums["loss"] + loss,
                "top1": sums["top1"] + lax.psum(
                    _hits(jnp, probs, labels, one_hot, 1), AXIS),
                "top5": sums["top5"] + lax.psum(
                    _hits(jnp, probs, labels, one_hot, 5), AXIS),
                "steps": sums["steps"] + 1.0,
                "images": sums["images"] + lax.psum(n, AXIS)}

    def replica_eval(trainable, non_trainable, images, labels, sums):
        loss, (probs, _) = forward(trainable, non_trainable, images, labels,
                                   False)
        return _add(sums, lax.pmean(loss, AXIS), probs, labels)

    loss_scale.check(loss_scale_update)
    counter = step_counter_index(optimizer)
    state = initial_state(jax, model, optimizer)
    train = jax.jit(jax.shard_map(
        replica_train, mesh=mesh, in_specs=(P(), P(AXIS), P(AXIS)),
        out_specs=(P(), P())), donate_argnums=0)
    evaluate = jax.jit(jax.shard_map(
        replica_eval, mesh=mesh,
        in_specs=(P(), P(), P(AXIS), P(AXIS), P()), out_specs=P()))
    return Steps(train=train, evaluate=evaluate, state=state)


def step_counter_index(optimizer) -> Optional[int]:
    """Where the schedule's step counter sits in `optimizer.variables`
    when the optimizer may skip steps (Keras 3's LossScaleOptimizer skips
    a step with non-finite gradients without counting it), else None."""
    inner = getattr(optimizer, "inner_optimizer", None)
    if inner is None:
        return None
    for index, var in enumerate(optimizer.variables):
        if var is inner.iterations:
            return index
    raise ValueError("the loss-scale optimizer's step counter is not among "
                     "its variables")


def counted_step(new_vars: list, old_vars: list, counter: Optional[int]
                 ) -> list:
    """`new_vars` with the step counter one past `old_vars`' whether or not
    the step was applied: tf-keras counts a skipped fp16 step, so the
    learning-rate schedule advances alike on both backends."""
    if counter is None:
        return new_vars
    new_vars = list(new_vars)
    new_vars[counter] = old_vars[counter] + 1
    return new_vars


def epoch_metrics(sums: Dict[str, Any], top1: bool, top5: bool
                  ) -> Dict[str, float]:
    """loss, accuracy, top_5_accuracy of an epoch's sums (reads them)."""
    steps = max(float(sums["steps"]), 1.0)
    images = max(float(sums["images"]), 1.0)
    out = {"loss": float(sums["loss"]) / steps}
    if top1:
        out["accuracy"] = float(sums["top1"]) / images
    if top5:
        out["top_5_accuracy"] = float(sums["top5"]) / images
    return out


def write_back(model, optimizer, state: Dict[str, Any]) -> None:
    """The trained values into the Keras variables (the RunResult's model,
    the weights' digest)."""
    for var, value in zip(model.trainable_variables, state["trainable"]):
        var.assign(value)
    for var, value in zip(model.non_trainable_variables,
                          state["non_trainable"]):
        var.assign(value)
    for var, value in zip(optimizer.variables, state["optimizer"]):
        var.assign(value)


def replicated(jax, mesh, tree):
    """`tree` placed on every device of the mesh (the sums' zeros)."""
    return jax.device_put(tree, jax.sharding.NamedSharding(mesh, P()))
