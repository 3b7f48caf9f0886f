"""Model Garden r2.3's classifier_trainer flags, read into a config layer.

The flags (--mode --model_type --dataset --model_dir --data_dir
--config_file --params_override ...) are defined here once; the trainer's CLI
and the all-reduce benchmark both take them. Only flags the user gave become
overrides, layered over --config_file and --params_override by
config.load_config. TensorFlow-free (absl only).
"""

from __future__ import annotations

import re
import sys
from typing import Any, Mapping, Optional

from absl import flags, logging

from official_bench.config import dotted_keys, peer_keys
from official_bench.contracts import exit_status
from official_bench.host import flag_errors
from official_bench.host.terminal import fitted_absl_help

FLAGS = flags.FLAGS

flags.DEFINE_enum("mode", None, ["train_and_eval", "train", "eval",
                                 "export_only"],
                  "What to run; default from the config (train_and_eval).")
flags.DEFINE_string("model_type", None,
                    "Base config: resnet (ImageNet ResNet v1.5) or "
                    "resnet_cifar (small 32x32 ResNet). Default resnet; when "
                    "given it also sets model.name.")
flags.DEFINE_string("dataset", None,
                    "Base dataset config: imagenet (224x224, 1000 classes) or "
                    "cifar10 (32x32, 10 classes). Default imagenet.")
flags.DEFINE_string("model_dir", None,
                    "Where params.yaml, result.json (and checkpoints) go. "
                    "Default: the config's model_dir (from --config_file or "
                    "--params_override), else model_dir/run-<time> under "
                    "the current dir.")
flags.DEFINE_string("data_dir", None,
                    "Data directory for both train and validation datasets "
                    "(builders records, tfds, service, python read it; "
                    "synthetic and zmq do not, and refuse it: exit 2).")
flags.DEFINE_string("config_file", None,
                    "YAML config, e.g. configs/examples/resnet/imagenet/"
                    "gpu.yaml or a DLPerf/Model Garden r2.3 YAML.")
flags.DEFINE_string("params_override", None,
                    "Overrides on top of --config_file: a YAML/JSON string "
                    "('runtime: {num_gpus: 0}'), dotted pairs "
                    "('train.steps=100,runtime.num_gpus=0') or a YAML file; "
                    "'runtime.backend=jax' trains with Keras 3 on JAX.")
flags.DEFINE_integer("log_steps", None,
                     "Steps per TimeHistory line (train.time_history."
                     "log_steps; default 100).")
flags.DEFINE_integer("num_gpus", None,
                     "GPUs to use (runtime.num_gpus); 0 trains on the CPU.")
flags.DEFINE_string("profile_steps", None,
                    "A,B: write a TensorFlow profiler trace of steps A..B to "
                    "model_dir/profile (runtime.profile_steps); those steps "
                    "are left out of the statistics.")
flags.DEFINE_boolean("run_eagerly", None,
                     "Run the Keras model eagerly (debugging; slow).")
flags.DEFINE_string("tpu", None, "Accepted empty only (--tpu=); TPUs are "
                                 "not supported.")


def flag_overrides(values: Optional[Mapping[str, Any]] = None) -> dict:
    """The explicit flags as a config layer (only flags actually given):
    the parsed flags', or those in `values` (flag name -> value, None: not
    given) for an entry point that parses some of them itself
    (data/input_bench.py)."""
    tree: dict = {}
    get = (lambda name: getattr(FLAGS, name)) if values is None \
        else values.get

    def put(path, value):
        if value is not None:
            dotted_keys.put(tree, path, value)

    put("mode", get("mode"))
    put("model_dir", get("model_dir"))
    put("model.name", get("model_type"))
    put("train_dataset.data_dir", get("data_dir"))
    put("validation_dataset.data_dir", get("data_dir"))
    put("train.time_history.log_steps", get("log_steps"))
    put("runtime.num_gpus", get("num_gpus"))
    put("runtime.run_eagerly", get("run_eagerly"))
    put("runtime.profile_steps", _steps_pair(get("profile_steps")))
    put("runtime.tpu", get("tpu"))
    return tree


def config_from_flags(model_dir=None):
    """The config the flags describe (layers as in the module docstring),
    through config.load_config, the layering trainer.run and the launcher
    use too; shared by every entry point that takes the trainer's flags.
    `model_dir` is the entry point's default, below every layer: a
    model_dir from --config_file or --params_override wins over it,
    --model_dir over all."""
    from official_bench import config as config_lib
    return config_lib.load_config(
        config_file=FLAGS.config_file, params_override=FLAGS.params_override,
        overrides=flag_overrides(), model_type=FLAGS.model_type or "resnet",
        dataset=FLAGS.dataset or "imagenet",
        defaults=None if model_dir is None else {"model_dir": model_dir})


def _steps_pair(text):
    """'10,12' -> [10, 12]; anything else is left for the config check."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    # ASCII digits: str.isdigit() also takes '²', which int() refuses.
    return [int(p) for p in parts] \
        if all(p.isascii() and p.isdigit() for p in parts) \
        else text


def parse_flags(argv):
    """app.run's flags_parser for every entry point on these flags: a flag
    error is one line naming the flag and the closest valid one (flag or
    enum value), exit 2, instead of absl's "FATAL Flags parsing error" and
    exit 1 (host/flag_errors.py)."""
    try:
        return FLAGS(argv)
    except flags.UnrecognizedFlagError as e:
        message = _unknown_flag(e.flagname, str(e.flagvalue))
    except flags.Error as e:
        message = re.sub(r"invalid literal for int\(\) with base 10: .*",
                         "not an integer", str(e))
        message = re.sub(r"could not convert string to float: .*",
                         "not a number", message)
        name = re.match(r"flag --([^=\s]+)", message)
        values = getattr(getattr(FLAGS[name[1]], "parser", None),
                         "enum_values", None) if name and name[1] in FLAGS \
            else None
        if values:
            message += flag_errors.suggestion(
                message.split("=", 1)[1].split(":", 1)[0], values)
    print(f"error: {' '.join(message.split())}; see --help", file=sys.stderr)
    raise SystemExit(exit_status.CONFIG)


def _unknown_flag(name: str, arg: str) -> str:
    """A peer's flag (config/peer_keys.py; a boolean one as --noX too, its
    value read) is told the config key or flag it sets here; any other is
    offered the nearest of the flags --help lists, never absl's own
    (--verbosity, --run_with_pdb, ...)."""
    value = arg.split("=", 1)[1] if "=" in arg else None
    hint = peer_keys.flag_hint(name, value)
    if hint:
        return f"unknown flag --{name}; {hint}"
    # absl names a module run as __main__ by its path: ours are all but
    # absl's own (its --help family belongs to no module).
    ours = [f"--{flag.name}" for module, defined
            in FLAGS.flags_by_module_dict().items()
            if module.split(".")[0] != "absl" for flag in defined]
    # A typo is close; a peer's other flag (--iter_unit) is near nothing.
    return flag_errors.unknown_flag("--" + name, ours, cutoff=0.7)


def start_main(argv) -> Optional[int]:
    """What every entry point on these flags does first: absl leaves words
    it did not parse in argv[1:], which are refused by name (the exit
    status to return), then INFO logging."""
    if len(argv) > 1:
        print(f"error: unexpected arguments {argv[1:]}; see --help",
              file=sys.stderr)
        return exit_status.CONFIG
    logging.set_verbosity(logging.INFO)
    return None


def answer_help(argv, usage: str, *sections) -> bool:
    """Prints `usage`, this module's flags and those of each (title,
    module) in `sections` to stdout when argv asks for help; True if it did
    (the caller exits 0).

    absl's own --help lists only the flags __main__ defines (none: they are
    here) and exits 1; a help request is not a failure."""
    if not any(a in ("-h", "--help", "--helpshort", "--helpfull")
               for a in argv[1:]):
        return False
    FLAGS(argv[:1])
    text = [usage.strip()]
    for title, module in (("Model Garden r2.3 flags (layers: --config_file "
                           "< --params_override < these)",
                           sys.modules[__name__]),) + sections:
        with fitted_absl_help():
            listing = FLAGS.module_help(module).strip().split("\n", 1)
        text += ["", title + ":", listing[1] if len(listing) > 1 else ""]
    print("\n".join(text).rstrip())
    return True
