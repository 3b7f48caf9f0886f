"""`model.optimizer` -> a tf-keras optimizer (before loss scaling)."""

from __future__ import annotations

from official_bench.config import OptimizerConfig
from official_bench.runtime.keras_setup import keras


def build_optimizer(opt: OptimizerConfig, learning_rate):
    """momentum / sgd / rmsprop / adam, with optional weight EMA."""
    ema = {}
    if opt.moving_average_decay:
        ema = dict(use_ema=True, ema_momentum=opt.moving_average_decay)
    if opt.name == "momentum":
        return keras.optimizers.SGD(learning_rate, momentum=opt.momentum,
                                    nesterov=opt.nesterov, **ema)
    if opt.name == "sgd":
        return keras.optimizers.SGD(learning_rate, nesterov=False, **ema)
    if opt.name == "rmsprop":
        return keras.optimizers.RMSprop(learning_rate, rho=opt.decay,
                                        momentum=opt.momentum,
                                        epsilon=opt.epsilon, **ema)
    if opt.name == "adam":
        return keras.optimizers.Adam(learning_rate, beta_1=opt.beta_1,
                                     beta_2=opt.beta_2, epsilon=opt.epsilon,
                                     **ema)
    raise ValueError(f"unknown optimizer {opt.name!r}")
