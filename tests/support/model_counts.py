"""What the model-variant tests (models/test_bn_statistics.py,
models/test_bn_backward.py) check stays the same across a variant: the
batch-norm classes a config builds, its trainable parameters and its
layer-shape multiply-adds."""

import numpy as np

from official_bench import config as C


def counts(keras, override: str) -> dict:
    """The model of `override` (after the JAX backend on CPU), built with
    `keras`: {"bn_classes", "trainable", "macs", "relus": [ReLU layers,
    batch norms with the ReLU inside]}."""
    from official_bench.measure.layer_flops import count_forward
    from official_bench.models import factory
    cfg = C.load_config(params_override=(
        "runtime.backend=jax,runtime.num_gpus=0," + override))
    model = factory.build_model(cfg, 0, keras=keras, backend="jax")
    kinds = {type(layer).__name__ for layer in model.layers
             if isinstance(layer, keras.layers.BatchNormalization)}
    relus = [sum(isinstance(layer, keras.layers.Activation) and
                 getattr(layer.activation, "__name__", "") == "relu"
                 for layer in model.layers),
             sum(bool(getattr(layer, "fused_relu", False))
                 for layer in model.layers)]
    return {"bn_classes": sorted(kinds), "relus": relus,
            "trainable": int(sum(np.prod(w.shape)
                                 for w in model.trainable_weights)),
            "macs": count_forward(model, keras).macs}
