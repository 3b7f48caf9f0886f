"""The one model definition (models/) built by both Keras flavours: Keras 3
on JAX in a child Python (as the JAX backend builds it, through the
factory) and tf-keras here; the same layers, names, weights, shapes,
output shapes and regularised kernels, and ResNet-50's 25,557,032
trainable parameters. ResNet-50 takes ~10 s to build on Keras 3 on this
CPU, so the child builds each model once."""

import json

import numpy as np
import pytest

from official_bench import config as C
from official_bench.models import factory
from support.helpers import keras3_child

RESNET50_TRAINABLE = 25_557_032
# name -> params_override of the config the trainer would build it from
MODELS = {
    "resnet50": "model.name=resnet,train_dataset.image_size=224,"
                "train_dataset.num_classes=1000",
    "resnet_cifar": "model.name=resnet_cifar,model.model_params.depth=20,"
                    "train_dataset.image_size=32,"
                    "train_dataset.num_classes=10",
}
REGULARISERS = ("kernel_regularizer", "bias_regularizer",
                "gamma_regularizer", "beta_regularizer")


def _weight_name(w):
    """'kernel' for tf-keras' 'stem_conv/kernel:0' and Keras 3's 'kernel'."""
    return w.name.split("/")[-1].split(":")[0]


def describe(model):
    """Layer by layer: name, class, output shape, weights (name, shape,
    trainable) and which of them carry a regulariser."""
    trainable_ids = {id(w) for w in model.trainable_weights}
    layers = []
    for layer in model.layers:
        if type(layer).__name__ == "InputLayer":
            continue  # Keras names it itself, differently per flavour
        layers.append({
            "name": layer.name, "class": type(layer).__name__,
            "output": [d for d in layer.output.shape[1:]],
            "weights": [[_weight_name(w), [int(d) for d in w.shape],
                         id(w) in trainable_ids] for w in layer.weights],
            "regularised": sorted(
                r for r in REGULARISERS
                if getattr(layer, r, None) is not None)})
    return {"layers": layers,
            "input": [d for d in model.inputs[0].shape[1:]],
            "input_dtype": str(model.inputs[0].dtype).replace(
                "<dtype: '", "").rstrip("'>"),
            "trainable": int(sum(np.prod(w.shape)
                                 for w in model.trainable_weights))}


def _build(name, keras, backend):
    cfg = C.load_config(params_override=MODELS[name])
    return factory.build_model(cfg, 0, keras=keras, backend=backend)


def keras3_models():
    """In the child: each model as the JAX backend builds it, its
    variables left uninitialised (only their shapes are compared):
    initialising them compiled ~100 small XLA programs, ~20 CPU-s."""
    import keras
    out = {"backend": keras.backend.backend()}
    with keras.StatelessScope(initialize_variables=False):
        for name in MODELS:
            out[name] = describe(_build(name, keras, "jax"))
    print(json.dumps(out))


@pytest.fixture(scope="module")
def on_keras3():
    r = keras3_child(__file__, "keras3_models")
    assert r["backend"] == "jax"
    return r


@pytest.fixture(scope="module")
def on_tf_keras():
    from official_bench.runtime.keras_setup import keras
    return {name: json.loads(json.dumps(describe(_build(name, keras,
                                                         "tensorflow"))))
            for name in MODELS}


def test_resnet50_has_the_torchvision_count_on_keras3(on_keras3):
    assert on_keras3["resnet50"]["trainable"] == RESNET50_TRAINABLE
    names = [l["name"] for l in on_keras3["resnet50"]["layers"]]
    assert "stage3_block6_out" in names and names[-1] == "probs"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_both_flavours_build_the_same_model(on_keras3, on_tf_keras, name):
    ours, theirs = on_keras3[name], on_tf_keras[name]
    assert [l["name"] for l in ours["layers"]] == \
        [l["name"] for l in theirs["layers"]]
    for a, b in zip(ours["layers"], theirs["layers"]):
        assert a == b, a["name"]
    assert ours["input"] == theirs["input"]
    assert ours["input_dtype"] == theirs["input_dtype"] == "float32"
    assert ours["trainable"] == theirs["trainable"]


def test_resnet_cifar_is_the_cifar_network(on_keras3):
    """depth 20: 3 stages of 3 basic blocks, 10 classes on 32x32 (about
    0.27 M parameters, He et al.'s ResNet-20)."""
    r = on_keras3["resnet_cifar"]
    assert r["input"] == [32, 32, 3]
    assert 260_000 < r["trainable"] < 280_000
    assert r["layers"][-1]["output"] == [10]
