"""The JAX backend's speed options in the config: runtime.xla_flags'
spelling, model_params.pad_input_channels' range and bn_statistics'
choices (config/ranges.py), each refused on the tensorflow backend with
one line (config/backends.py), accepted on jax."""

import pytest

from official_bench import config as C
from official_bench.config import backends
from support.helpers import config_error_lines

JAX = "runtime.backend=jax,runtime.num_gpus=0,"


def test_jax_takes_them():
    cfg = C.load_config(params_override=JAX + (
        "runtime.xla_flags=['--xla_gpu_enable_command_buffer=FUSION,CUBLAS',"
        "--xla_gpu_enable_command_buffer_x=,--xla_dump_hlo_as_text],"
        "model.model_params.pad_input_channels=4,"
        "model.model_params.bn_statistics=one_pass"))
    assert cfg.runtime.xla_flags == [
        "--xla_gpu_enable_command_buffer=FUSION,CUBLAS",
        "--xla_gpu_enable_command_buffer_x=", "--xla_dump_hlo_as_text"]
    assert cfg.model.model_params.pad_input_channels == 4
    assert cfg.model.model_params.bn_statistics == "one_pass"
    assert backends.refusals(cfg) == []


def test_the_defaults_change_nothing():
    cfg = C.load_config()
    assert cfg.runtime.xla_flags == []
    assert cfg.model.model_params.pad_input_channels is None
    assert cfg.model.model_params.bn_statistics == "two_pass"


@pytest.mark.parametrize("override, key", [
    ("runtime.xla_flags=[--xla_gpu_autotune_level=0]", "runtime.xla_flags"),
    ("model.model_params.pad_input_channels=4",
     "model.model_params.pad_input_channels"),
    ("model.model_params.bn_statistics=one_pass",
     "model.model_params.bn_statistics"),
    ("model.model_params.bn_statistics=pallas",
     "model.model_params.bn_statistics"),
    ("model.model_params.stem_pool=shifted", "model.model_params.stem_pool"),
    ("model.model_params.bn_backward=vjp", "model.model_params.bn_backward"),
    ("runtime.loss_scale_update=select", "runtime.loss_scale_update"),
])
def test_tensorflow_refuses_each_in_one_line(override, key):
    lines = config_error_lines(override)
    assert len(lines) == 1 and lines[0].startswith(key + ":"), lines
    assert "needs runtime.backend jax" in lines[0]


def test_every_tensorflow_refusal_is_one_of_these():
    assert {key for key, _, _ in backends.TF_REFUSED} == {
        "runtime.xla_flags", "model.model_params.pad_input_channels",
        "model.model_params.bn_statistics",
        "model.model_params.stem_space_to_depth",
        "model.model_params.stem_pool", "model.model_params.bn_backward",
        "runtime.loss_scale_update"}


def test_bn_statistics_names_its_choices():
    lines = config_error_lines(JAX + "model.model_params.bn_statistics=fast")
    assert len(lines) == 1 and lines[0].startswith(
        "model.model_params.bn_statistics: unknown bn_statistics 'fast'; "
        "valid: two_pass, one_pass, pallas ("), lines


@pytest.mark.parametrize("flags, words", [
    ("[xla_gpu_autotune_level=0]", "entry 'xla_gpu_autotune_level=0' is "
                                   "not --xla_<name>=<value>"),
    ("[--XLA_GPU_AUTOTUNE_LEVEL=0]", "is not --xla_<name>=<value>"),
    ("[--tf_xla_auto_jit=2]", "is not --xla_<name>=<value>"),
    ("['--xla_dump_to=/a b']", "(lower case, no spaces)"),
    ("[--xla_gpu_autotune_level=0,--xla_gpu_autotune_level=4]",
     "--xla_gpu_autotune_level is given twice"),
    ("[--xla_force_host_platform_device_count=4]",
     "runtime.cpu_devices sets that one"),
    ("[" + ",".join(f"--xla_f{i}" for i in range(65)) + "]",
     "65 entries; at most 64"),
])
def test_a_misspelt_flag_is_refused_naming_it(flags, words):
    lines = config_error_lines(JAX + f"runtime.xla_flags={flags}")
    assert len(lines) == 1, lines
    assert lines[0].startswith("runtime.xla_flags: ") and words in lines[0]


@pytest.mark.parametrize("value", [1, 3, 17])
def test_pad_input_channels_must_add_channels(value):
    lines = config_error_lines(
        JAX + f"model.model_params.pad_input_channels={value}")
    assert len(lines) == 1 and lines[0].startswith(
        f"model.model_params.pad_input_channels: must be more than "
        f"train_dataset.num_channels (3) and <= 16, got {value} (null: no "
        f"padding) (from --params_override"), lines


@pytest.mark.parametrize("override, key, says", [
    ("model.model_params.stem_space_to_depth=true",
     "model.model_params.stem_space_to_depth", "needs data_format "
     "channels_last (or auto on jax)"),
    ("model.model_params.bn_statistics=pallas",
     "model.model_params.bn_statistics", "pallas reads channels_last "
     "activations; needs data_format channels_last (or auto on jax)")])
def test_the_channels_last_options_refuse_channels_first(override, key,
                                                         says):
    lines = config_error_lines(
        JAX + override + ",model.model_params.data_format=channels_first")
    assert len(lines) == 1 and lines[0].startswith(f"{key}: {says}"), lines
