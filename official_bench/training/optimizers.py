"""`model.optimizer` -> an optimizer of either backend's Keras (before loss
scaling). TensorFlow-free: the caller passes the Keras module.

Without weight EMA the optimizers are tf-keras' legacy ones (the classes
TF 2.3's Keras had, and what Model Garden's classifier_trainer builds): each
variable's update is one fused kernel (ResourceApplyKerasMomentum,
ResourceApplyRMSProp, ResourceApplyAdam) on CPU and GPU alike. The newer
`keras.optimizers.*` classes build the update from separate element-wise ops
per variable (for momentum SGD: two multiplies, a negate, an add and two
assigns over every weight: several extra passes over 25.6 M ResNet-50
weights each step; measured in BENCHMARKS.md, "vs Model Garden"); on a GPU
they are compiled by XLA one variable at a time. Weight EMA
(`moving_average_decay`) exists only in the newer classes (`use_ema`), so
it keeps them. Keras 3 (the JAX backend) has only the newer classes; JAX
compiles the whole step, updates included, into one program.
"""

from __future__ import annotations

from official_bench.config import OptimizerConfig


def _is_keras3(keras) -> bool:
    return not str(getattr(keras, "__version__", "3")).startswith("2.")


def build_optimizer(opt: OptimizerConfig, learning_rate, keras):
    """momentum / sgd / rmsprop / adam of `keras`; on tf-keras fused unless
    weight EMA is asked."""
    if opt.moving_average_decay:
        return _build(keras.optimizers, opt, learning_rate,
                      use_ema=True, ema_momentum=opt.moving_average_decay)
    if _is_keras3(keras):
        return _build(keras.optimizers, opt, learning_rate)
    return _build(keras.optimizers.legacy, opt, learning_rate)


def _build(module, opt: OptimizerConfig, learning_rate, **extra):
    """The named optimizer from `module` (legacy or new), same arguments."""
    if opt.name == "momentum":
        return module.SGD(learning_rate, momentum=opt.momentum,
                          nesterov=opt.nesterov, **extra)
    if opt.name == "sgd":
        return module.SGD(learning_rate, nesterov=False, **extra)
    if opt.name == "rmsprop":
        return module.RMSprop(learning_rate, rho=opt.decay,
                              momentum=opt.momentum, epsilon=opt.epsilon,
                              **extra)
    if opt.name == "adam":
        return module.Adam(learning_rate, beta_1=opt.beta_1,
                           beta_2=opt.beta_2, epsilon=opt.epsilon, **extra)
    raise ValueError(f"unknown optimizer {opt.name!r}; valid: momentum, sgd, "
                     "rmsprop, adam")
