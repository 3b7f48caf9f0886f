"""What the model-variant tests (models/test_bn_statistics.py,
models/test_bn_backward.py) check stays the same across a variant: the
batch-norm classes a config builds, its trainable parameters and its
layer-shape multiply-adds."""

import numpy as np

from official_bench import config as C


def counts(keras, override: str) -> dict:
    """The model of `override` (after the JAX backend on CPU), built with
    `keras`: {"bn_classes", "trainable", "macs"}."""
    from official_bench.measure.layer_flops import count_forward
    from official_bench.models import factory
    cfg = C.load_config(params_override=(
        "runtime.backend=jax,runtime.num_gpus=0," + override))
    model = factory.build_model(cfg, 0, keras=keras, backend="jax")
    kinds = {type(layer).__name__ for layer in model.layers
             if isinstance(layer, keras.layers.BatchNormalization)}
    return {"bn_classes": sorted(kinds),
            "trainable": int(sum(np.prod(w.shape)
                                 for w in model.trainable_weights)),
            "macs": count_forward(model, keras).macs}
