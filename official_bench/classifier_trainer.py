"""Command-line entry, flag-compatible with Model Garden r2.3's classifier_trainer.

    python -m official_bench.classifier_trainer \\
        --mode=train_and_eval --model_type=resnet --dataset=imagenet \\
        --model_dir=/tmp/rn50 --data_dir=/data/imagenet \\
        --config_file=configs/examples/resnet/imagenet/gpu.yaml \\
        --params_override='runtime.num_gpus=8'

Layering: built-in defaults (per --model_type/--dataset) < --config_file <
--params_override < the explicit flags below. Exit status: the table in
official_bench/contracts/exit_status.py (0 success, 1 other, 2 bad
configuration, 3 cluster problem, 4 peer lost, 128+N signal N). A
multi-worker run whose peers do not all arrive within
runtime.peer_timeout_seconds prints a line starting "official_bench:
timeout:" naming them and is SIGKILLed (137).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Optional

from absl import app, flags, logging

from official_bench import config_tree
from official_bench.contracts import exit_status

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
                    "Default: model_dir/run-<time> under the current dir.")
flags.DEFINE_string("data_dir", None,
                    "Data directory for both train and validation datasets "
                    "(not needed with builder: synthetic).")
flags.DEFINE_string("config_file", None,
                    "YAML config, e.g. configs/examples/resnet/imagenet/"
                    "gpu.yaml or a DLPerf/Model Garden r2.3 YAML.")
flags.DEFINE_string("params_override", None,
                    "Overrides on top of --config_file: a YAML/JSON string "
                    "('runtime: {num_gpus: 0}'), dotted pairs "
                    "('train.steps=100,runtime.num_gpus=0') or a YAML file.")
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
flags.DEFINE_string("tpu", None, "Accepted for r2.3 compatibility; TPUs are "
                                 "not supported.")


def flag_overrides() -> dict:
    """The explicit flags as a config layer (only flags actually given)."""
    tree: dict = {}

    def put(path, value):
        if value is not None:
            config_tree.put(tree, path, value)

    put("mode", FLAGS.mode)
    put("model_dir", FLAGS.model_dir)
    if FLAGS.model_type is not None:
        put("model.name", FLAGS.model_type)
    put("train_dataset.data_dir", FLAGS.data_dir)
    put("validation_dataset.data_dir", FLAGS.data_dir)
    put("train.time_history.log_steps", FLAGS.log_steps)
    put("runtime.num_gpus", FLAGS.num_gpus)
    put("runtime.run_eagerly", FLAGS.run_eagerly)
    put("runtime.profile_steps", _steps_pair(FLAGS.profile_steps))
    put("runtime.tpu", FLAGS.tpu)
    return tree


def config_from_flags(model_dir=None):
    """The config the flags describe (layers as in the module docstring),
    through config.load_config, the layering trainer.run and the launcher
    use too; shared by every entry point that takes the trainer's flags."""
    from official_bench import config as config_lib
    overrides = flag_overrides()
    if model_dir is not None:
        overrides.setdefault("model_dir", model_dir)
    return config_lib.load_config(
        config_file=FLAGS.config_file, params_override=FLAGS.params_override,
        overrides=overrides, model_type=FLAGS.model_type or "resnet",
        dataset=FLAGS.dataset or "imagenet")


def _steps_pair(text):
    """'10,12' -> [10, 12]; anything else is left for the config check."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    # ASCII digits: str.isdigit() also takes '²', which int() refuses.
    return [int(p) for p in parts] \
        if all(p.isascii() and p.isdigit() for p in parts) \
        else text


def _default_model_dir() -> str:
    import time
    return f"model_dir/run-{time.strftime('%Y%m%d-%H%M%S')}"


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


def main(argv) -> int:
    refused = start_main(argv)
    if refused is not None:
        return refused
    # Imported here so --help answers without loading TensorFlow.
    from official_bench import config as config_lib
    from official_bench.runtime.cluster import ClusterError, PeerLost
    from official_bench.runtime.stop_signals import RunStopped
    try:
        cfg = config_from_flags(model_dir=_default_model_dir())
        from official_bench import trainer
        trainer.train_and_evaluate(cfg)
    except config_lib.ConfigError as e:
        logging.error("%s", e)
        print(f"error: {e}", file=sys.stderr)
        return exit_status.CONFIG
    except (RunStopped, PeerLost) as e:
        # Exit at once: a multi-worker teardown can wait for peers that are
        # still training or gone, and would print after our last line.
        logging.error("%s", e)
        logging.flush()
        sys.stdout.flush()
        print(f"error: {e}", file=sys.stderr, flush=True)
        os._exit(e.exit_status if isinstance(e, RunStopped)
                 else exit_status.PEER_LOST)
    except ClusterError as e:
        logging.error("%s", e)
        print(f"error: {e}", file=sys.stderr)
        return exit_status.CLUSTER
    except Exception as e:  # noqa: BLE001 - one clear line, then the trace
        # Our input pipeline's messages reach us inside TensorFlow's op
        # errors ("assertion failed: [official_bench: bad record ...]").
        ours = re.search(r"official_bench:[^\]\n]*", str(e))
        if not ours:
            raise
        logging.exception("training stopped")
        print(f"error: {ours.group(0).strip()}", file=sys.stderr)
        return exit_status.FAILED
    return exit_status.OK


def run_main() -> None:
    """Console-script entry (official-bench-train)."""
    if any(a in ("-h", "--help", "--helpshort") for a in sys.argv[1:]):
        # absl exits 1 after --help; a help request is not a failure.
        flags.FLAGS(sys.argv[:1])
        app.usage(shorthelp=True, writeto_stdout=True, exitcode=0)
    app.run(lambda argv: sys.exit(main(argv)))


if __name__ == "__main__":
    run_main()
