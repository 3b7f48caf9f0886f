"""Command-line entry, flag-compatible with Model Garden r2.3's
classifier_trainer: the absl flags to a config, the run, and each failure
as one ``error:`` line and its exit status. The command, the layering and
the exit statuses (EXIT_STATUSES, from contracts/exit_status) are its
--help (USAGE below).
"""

from __future__ import annotations

import logging as std_logging
import os
import re
import sys
import textwrap
import traceback
from typing import Optional

from absl import app, flags, logging

from official_bench.config.flags import (
    answer_help,
    config_from_flags,
    parse_flags,
    start_main,
)
from official_bench.contracts import exit_status
from official_bench.runtime import stop_signals

# --help's exit statuses (contracts/exit_status.help_text).
EXIT_STATUSES = {
    exit_status.OK: "success",
    exit_status.FAILED: "other",
    exit_status.CONFIG: "bad configuration",
    exit_status.CLUSTER: "cluster problem",
    exit_status.PEER_LOST: "peer lost",
    exit_status.NOT_WRITABLE: "a file could not be written (disk full, "
                              "quota, read-only, permission)",
    exit_status.KILLED: "killed (SIGKILL), e.g. a multi-worker run whose "
                        "peers did not all arrive within "
                        "runtime.peer_timeout_seconds (after a line "
                        'starting "official_bench: timeout:" naming them)',
    exit_status.SIGNALS: "signal N",
}
# --help's text: the command, the layering, the exit statuses.
USAGE = """Command-line entry, flag-compatible with Model Garden r2.3's
classifier_trainer.

    python -m official_bench.classifier_trainer \\
        --mode=train_and_eval --model_type=resnet --dataset=imagenet \\
        --model_dir=/tmp/rn50 --data_dir=/data/imagenet \\
        --config_file=configs/examples/resnet/imagenet/gpu.yaml \\
        --params_override='runtime.num_gpus=8'

The same on JAX (Keras 3, no TensorFlow):
--params_override='runtime.backend=jax,runtime.num_gpus=8'.

Layering: built-in defaults (per --model_type/--dataset) < --config_file <
--params_override < the explicit flags below.

""" + textwrap.fill(
    exit_status.help_text(EXIT_STATUSES) + " The table: "
    "official_bench/contracts/exit_status.py (docs/exit_status.md). Every "
    "failure above ends in one line, ``error: ...``, and no traceback; "
    "``--verbose`` prints the traceback above that line, for a bug report.",
    76)

if "verbose" not in flags.FLAGS:  # once, also when run as __main__
    flags.DEFINE_boolean(
        "verbose", False, "Print the traceback of a failure above its "
        "one 'error:' line (for a bug report); without it a failure the "
        "trainer knows (docs/exit_status.md) is that one line.")


def _default_model_dir() -> str:
    import time
    return f"model_dir/run-{time.strftime('%Y%m%d-%H%M%S')}"


def _fail(message: str, status: int,
          error: Optional[BaseException] = None) -> int:
    """The one place a failure is said: once, as the last line; the
    traceback of ``error`` above it only with --verbose."""
    logging.flush()
    sys.stdout.flush()
    if error is not None and flags.FLAGS["verbose"].value:
        traceback.print_exception(error, file=sys.stderr)
    print(f"error: {message}", file=sys.stderr, flush=True)
    # The line stays the last: TensorFlow's Python warnings while the
    # process ends (a refused checkpoint's objects warn, when collected,
    # about values never restored) are not shown.
    std_logging.getLogger("tensorflow").setLevel(std_logging.ERROR)
    return status


def main(argv) -> int:
    # This process is the run's own: a second signal may end it at once.
    stop_signals.own_process()
    refused = start_main(argv)
    if refused is not None:
        return refused
    # 1. The config, what it names on this machine and the cluster
    #    (TF_CONFIG, hosts, task index), before TensorFlow starts: a typo
    #    or a missing folder ends in a second (train_and_evaluate repeats
    #    the check for the API's callers; it costs microseconds).
    from official_bench import config as config_lib, trainer
    from official_bench.host.write_errors import NotWritable
    try:
        cfg = config_from_flags(model_dir=_default_model_dir())
        trainer.check_before_start(cfg)
    except config_lib.ConfigError as e:
        return _fail(str(e), exit_status.CONFIG, e)
    except NotWritable as e:
        return _fail(str(e), exit_status.NOT_WRITABLE, e)
    # oneDNN or Eigen: TensorFlow reads TF_ENABLE_ONEDNN_OPTS only when it
    # loads, so it is set now (runtime/cpu_kernels.py).
    from official_bench.runtime import cpu_kernels
    cpu_kernels.apply(cfg.runtime.cpu_kernels, cfg.runtime.num_gpus)

    # 2. The run (TensorFlow is imported from here on). A SIGTERM or a
    #    Ctrl-C outside the training steps unwinds (the input feeds close)
    #    to one line naming its stage: trainer.stops, as for the API.
    try:
        try:
            status = _train(cfg)
        except KeyboardInterrupt as e:  # outside train_and_evaluate
            status = _fail(_outside_the_steps("SIGINT", e),
                           exit_status.INTERRUPTED, e)
    except BaseException:
        if _joined_jax_processes():  # a bug's traceback, then out at once
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(exit_status.FAILED)
        raise
    if status != exit_status.OK and _joined_jax_processes():
        # A normal exit would wait at jax.distributed's shutdown barrier
        # for every process, and one still inside a collective with this
        # one would never come: both would hang.
        os._exit(status)
    return status


def _train(cfg) -> int:
    """The run; a failure the trainer knows is one line and its status."""
    from official_bench import config as config_lib, trainer
    from official_bench.host.write_errors import NotWritable
    from official_bench.runtime.cluster import ClusterError, PeerLost
    try:
        trainer.train_and_evaluate(cfg)
    except config_lib.ConfigError as e:
        return _fail(str(e), exit_status.CONFIG, e)
    except stop_signals.STOPS + (PeerLost,) as e:
        if getattr(e, "outside_the_steps", False):
            # Outside the steps (trainer.stops): the line names the stage,
            # and main returns its status.
            return _fail(str(e), e.exit_status, e)
        # Exit at once: a multi-worker teardown can wait for peers that are
        # still training or gone, and would print after our last line.
        os._exit(_fail(str(e), exit_status.PEER_LOST
                       if isinstance(e, PeerLost) else e.exit_status, e))
    except ClusterError as e:
        return _fail(str(e), exit_status.CLUSTER, e)
    except NotWritable as e:
        # The cause is outside the program: the line says it all.
        return _fail(str(e), exit_status.NOT_WRITABLE, e)
    except Exception as e:  # noqa: BLE001 - ours: one line; a bug: raised
        # Ours say "official_bench: ..." (a NaN stop, the run history, a
        # bad record inside TensorFlow's op errors: "assertion failed:
        # [official_bench: bad record ...]"); anything else is a bug, and
        # its traceback is the report.
        ours = re.search(r"official_bench:[^\]\n]*", str(e))
        if not ours:
            raise
        return _fail(ours.group(0).strip(), exit_status.FAILED, e)
    return exit_status.OK


def _outside_the_steps(signal_name: str, error: BaseException) -> str:
    """The line for a Ctrl-C that reached the CLI as a KeyboardInterrupt,
    naming the stage it came in: stop_signals' words, which RunStopped
    and RunInterrupted outside the steps say too (trainer.stops)."""
    from official_bench.measure import stages
    return stop_signals.outside_message(signal_name, stages.stage_of(error))


def _joined_jax_processes() -> bool:
    """Whether this process joined other JAX processes (its exit then
    meets theirs at jax.distributed's shutdown). Asks without starting
    JAX's backends (a refused XLA flag must not reach them)."""
    distributed = getattr(sys.modules.get("jax"), "distributed", None)
    joined = getattr(distributed, "is_initialized", None)
    return bool(joined and joined())


def run_main() -> None:
    """Console-script entry (official-bench-train)."""
    if answer_help(sys.argv, USAGE,
                   ("Failures", sys.modules[__name__])):
        sys.exit(exit_status.OK)
    app.run(lambda argv: sys.exit(main(argv)), flags_parser=parse_flags)


if __name__ == "__main__":
    run_main()
