"""build_optimizer: fused (legacy) update kernels, same math, EMA kept."""

import numpy as np
import pytest

from official_bench import config as C
from official_bench.runtime import precision
from official_bench.runtime.keras_setup import keras, tf
from official_bench.training.optimizers import build_optimizer

FUSED_OPS = {"momentum": "ResourceApplyKerasMomentum",
             "sgd": "ResourceApplyGradientDescent",
             "rmsprop": "ResourceApplyRMSProp",  # centered=False
             "adam": "ResourceApplyAdam"}


def _opt_config(**values):
    overrides = ",".join(f"model.optimizer.{k}={v}" for k, v in values.items())
    return C.load_config(params_override=overrides).model.optimizer


def _update_op_types(opt, var):
    """Op types of one traced apply_gradients on `var`."""
    @tf.function
    def apply(grad):
        opt.apply_gradients([(grad, var)])
    graph = apply.get_concrete_function(
        tf.TensorSpec(var.shape, var.dtype)).graph
    types = {op.type for op in graph.get_operations()}
    for fn in graph._functions.values():  # ops inside nested functions
        types |= {n.op for n in fn.definition.node_def}
    return types


@pytest.mark.parametrize("name", ["momentum", "sgd", "rmsprop", "adam"])
def test_without_ema_each_variable_is_updated_by_one_fused_kernel(name):
    opt = build_optimizer(_opt_config(name=name), 0.1, keras)
    assert isinstance(opt, keras.optimizers.legacy.Optimizer)
    types = _update_op_types(opt, tf.Variable(tf.ones((4, 3))))
    assert FUSED_OPS[name] in types, sorted(types)


def test_the_new_optimizer_would_build_the_update_from_elementwise_ops():
    # What the fused kernel replaces (guards the test above's meaning).
    opt = keras.optimizers.SGD(0.1, momentum=0.9)
    types = _update_op_types(opt, tf.Variable(tf.ones((4, 3))))
    assert "ResourceApplyKerasMomentum" not in types
    assert {"AssignVariableOp", "AssignAddVariableOp", "Mul"} <= types


def test_fused_momentum_trains_the_same_numbers_as_the_new_sgd():
    grads = [tf.constant(np.random.RandomState(i).randn(5, 2), tf.float32)
             for i in range(4)]
    results = []
    for opt in (build_optimizer(_opt_config(name="momentum", momentum=0.875),
                                0.05, keras),
                keras.optimizers.SGD(0.05, momentum=0.875)):
        var = tf.Variable(tf.ones((5, 2)))
        for g in grads:
            opt.apply_gradients([(g, var)])
        results.append(var.numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)
    assert not np.allclose(results[0], 1.0)


def test_weight_ema_keeps_the_new_optimizer():
    opt = build_optimizer(_opt_config(name="momentum",
                                      moving_average_decay=0.999), 0.1, keras)
    assert isinstance(opt, keras.optimizers.Optimizer)
    assert opt.use_ema and opt.ema_momentum == pytest.approx(0.999)


def test_float16_loss_scaling_wraps_the_fused_optimizer():
    opt = precision.wrap_optimizer(
        build_optimizer(_opt_config(name="momentum"), 0.1, keras), "float16",
        None)
    assert isinstance(opt, keras.mixed_precision.LossScaleOptimizer)
    var = tf.Variable(tf.ones((3,)))
    opt.apply_gradients([(tf.fill((3,), 2.0), var)])
    np.testing.assert_allclose(var.numpy(), 1.0 - 0.1 * 2.0)


def test_unknown_optimizer_names_the_valid_ones():
    # The config refuses the name; a copy of a loaded one takes it.
    cfg = C.replace_keys(_opt_config(name="momentum"), {"name": "lamb"})
    with pytest.raises(ValueError, match="momentum, sgd, rmsprop, adam"):
        build_optimizer(cfg, 0.1, keras)
