"""runtime.cpu_kernels: oneDNN or Eigen for TensorFlow's CPU ops.

TensorFlow reads TF_ENABLE_ONEDNN_OPTS once, when it loads, and never again
(`IsMklEnabled` in tensorflow/core/util/port.cc caches it). So the choice is
made here, before TensorFlow is imported: the trainer's CLI calls `apply`
right after the config is checked (the run scripts, the launcher, the doctor
and the benchmarks all start trainers through that CLI). The trainer calls
`settle` once TensorFlow is loaded: it logs what is in effect, as TensorFlow
itself reports it, and how to change it when that is not what was asked for
(a notebook that imported TensorFlow first).

    onednn  TF_ENABLE_ONEDNN_OPTS=1; wins over the variable in the
            environment (one log line says so)
    eigen   TF_ENABLE_ONEDNN_OPTS=0; the same
    auto    a TF_ENABLE_ONEDNN_OPTS the user set is respected; a GPU run
            (runtime.num_gpus > 0) keeps TensorFlow's default; on the CPU,
            oneDNN where host/cpu_features.py's rule says it is faster
            (x86 with AVX2 and FMA), TensorFlow's default elsewhere

The only module that reads or writes TF_ENABLE_ONEDNN_OPTS. TensorFlow-free:
`onednn_enabled` asks the TensorFlow already loaded, if any.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from typing import Any, Dict, Mapping, MutableMapping, Optional

from absl import logging

from official_bench.config import rules
from official_bench.host import cpu_features

ENV = "TF_ENABLE_ONEDNN_OPTS"
VALUES = {"onednn": "1", "eigen": "0"}
# TensorFlow's ReadBoolFromEnvVar accepts these (case-insensitive).
_TRUE, _FALSE = ("1", "true"), ("0", "false")
# Issue 31: Model Garden trained ResNet-50 at 0.10 img/s in bfloat16 against
# ~2.7 img/s in float32 on a 2-core AVX2 EPYC (no AVX512_BF16, no AMX).
BF16_SLOWDOWN = 25
# BENCHMARKS.md, "CPU kernels": ResNet-50 128x128 batch 8 in bfloat16 on an
# AVX512_BF16 EPYC, Eigen against oneDNN (median of alternating pairs).
BF16_EIGEN_SLOWDOWN = 15


@dataclasses.dataclass(frozen=True)
class Decision:
    """What a run's CPU kernels should be, decided before TensorFlow loads.

    `value` is what TF_ENABLE_ONEDNN_OPTS is set to ("1", "0"), or None to
    leave the environment as it is (the user's value or TensorFlow's own
    default); `reason` says why in words a log line can carry.
    """
    requested: str
    value: Optional[str]
    reason: str
    overridden: Optional[str] = None  # the user's value the config replaced


def _env_bool(text: Optional[str]) -> Optional[bool]:
    """TF_ENABLE_ONEDNN_OPTS as TensorFlow reads it; None: unset or a value
    TensorFlow would ignore (it then keeps its default)."""
    if text is None:
        return None
    low = text.strip().lower()
    return True if low in _TRUE else False if low in _FALSE else None


def decide(requested: str, num_gpus: int, environ: Mapping[str, str],
           flags: Optional[cpu_features.Flags]) -> Decision:
    """The rule of the module docstring, from the config, the environment
    and the CPU's flags (injected, so tests can play any machine)."""
    user = environ.get(ENV)
    if requested in VALUES:
        value = VALUES[requested]
        differs = user is not None and _env_bool(user) != (value == "1")
        return Decision(requested, value, f"runtime.cpu_kernels {requested}",
                        user if differs else None)
    if user is not None:
        return Decision(requested, None, f"{ENV}={user} from the environment")
    if num_gpus > 0:
        return Decision(requested, None,
                        "TensorFlow's default: a GPU run (runtime.num_gpus "
                        f"{num_gpus})")
    faster = cpu_features.onednn_is_faster(flags)
    if faster:
        return Decision(requested, "1", "this CPU has AVX2 and FMA, where "
                        "oneDNN measured faster (BENCHMARKS.md, CPU kernels)")
    return Decision(requested, None, "TensorFlow's default: " + (
        "no CPU flags to judge by" if faster is None else
        "a CPU without AVX2+FMA, not measured"))


_applied: Optional[Decision] = None


def apply(requested: str, num_gpus: int,
          environ: Optional[MutableMapping[str, str]] = None,
          cpuinfo: str = cpu_features.CPUINFO) -> Decision:
    """Decides and sets TF_ENABLE_ONEDNN_OPTS, before TensorFlow is imported.

    Called by the CLI; a process where TensorFlow is already loaded is left
    alone (the variable would no longer be read) and `settle` says so.
    """
    global _applied
    environ = os.environ if environ is None else environ
    decision = decide(requested, num_gpus, environ,
                      cpu_features.read_flags(cpuinfo))
    if "tensorflow" in sys.modules:
        return decision
    if decision.overridden is not None:
        logging.info("official_bench: runtime.cpu_kernels %s sets %s=%s over "
                     "%s=%s from the environment (runtime.cpu_kernels auto "
                     "would keep yours)", requested, ENV, decision.value,
                     ENV, decision.overridden)
    if decision.value is not None:
        environ[ENV] = decision.value
    _applied = decision
    return decision


def onednn_enabled() -> Optional[bool]:
    """The answer (IsMklEnabled) of the TensorFlow loaded in this process;
    None where none is loaded (this module never loads it: the JAX backend
    runs where there is none) or its build does not say."""
    if "tensorflow" not in sys.modules:
        return None
    try:
        port = importlib.import_module(
            "tensorflow.python.util._pywrap_util_port")
        return bool(port.IsMklEnabled())
    except (ImportError, AttributeError):  # pragma: no cover - other builds
        return None


def _state(enabled: Optional[bool]) -> str:
    return {True: "oneDNN", False: "Eigen", None: "unknown"}[enabled]


def bf16_on_eigen(dtype: str, num_gpus: int,
                  flags: Optional[cpu_features.Flags],
                  onednn: Optional[bool]) -> Optional[str]:
    """Where oneDNN is on but TensorFlow runs a bfloat16 CPU run's bf16 ops
    on Eigen (its "oneDNN supports DT_BFLOAT16 only on platforms with
    AVX-512" line), the words that say so; else None."""
    if dtype != "bfloat16" or num_gpus > 0 or onednn is not True:
        return None
    if cpu_features.onednn_takes_bf16(flags) is not False:
        return None
    return "bf16 ops on Eigen: no AVX-512"


def kernels_note(requested: str, dtype: str, num_gpus: int,
                 flags: Optional[cpu_features.Flags],
                 onednn: Optional[bool]) -> str:
    """The summary line's part from the facts: e.g. ', CPU kernels oneDNN
    (auto)', or ', CPU kernels oneDNN (auto; bf16 ops on Eigen: no
    AVX-512)'."""
    return _note_text(requested, onednn,
                      bf16_on_eigen(dtype, num_gpus, flags, onednn))


def _note_text(requested: str, onednn: Optional[bool],
               note: Optional[str]) -> str:
    tail = f"; {note}" if note else ""
    return f", CPU kernels {_state(onednn)} ({requested}{tail})"


def settle(requested: str, num_gpus: int, dtype: str) -> Optional[bool]:
    """Logs, once TensorFlow is loaded, which kernels are in effect and why;
    when that differs from what the config asks for, how to change it; and
    bf16_warning's line where it applies. Returns what TensorFlow reports."""
    flags = cpu_features.read_flags()
    enabled = onednn_enabled()
    warning = bf16_warning(dtype, num_gpus, flags, enabled)
    if warning:
        logging.warning("%s", warning)
    decision = _applied
    if decision is None or decision.requested != requested:
        # Not set by our CLI in this process: TensorFlow was loaded first.
        decision = decide(requested, num_gpus, os.environ, flags)
    wanted = None if decision.value is None else decision.value == "1"
    if wanted is None or enabled is None or wanted == enabled:
        eigen = bf16_on_eigen(dtype, num_gpus, flags, enabled)
        logging.info("official_bench: CPU kernels: %s%s (%s=%s; %s)",
                     _state(enabled), f", {eigen}" if eigen else "", ENV,
                     os.environ.get(ENV, "unset"), decision.reason)
        return enabled
    logging.warning(
        "official_bench: CPU kernels: %s, not the %s that runtime.cpu_kernels "
        "%s asks for (%s): TensorFlow was imported before official_bench "
        "could set %s, and reads it only then. To change it, set %s=%s "
        "before importing TensorFlow (os.environ in a notebook's first cell), "
        "or restart the kernel and call official_bench.run() before anything "
        "imports TensorFlow", _state(enabled), _state(wanted), requested,
        decision.reason, ENV, ENV, decision.value)
    return enabled


def nchw_refusal(cfg: Any, enabled: Optional[bool]) -> Optional[str]:
    """The error for a channels_first CPU run (config/rules.nchw_on_the_cpu)
    that TensorFlow reports running on Eigen (`enabled` False, settle's
    answer): runtime.cpu_kernels auto keeping an environment's or
    TensorFlow's own default of Eigen; eigen itself is refused with the
    config. None when it can run."""
    if not rules.nchw_on_the_cpu(cfg) or enabled is not False:
        return None
    return "model.model_params.data_format: " + rules.nchw_needs_onednn(
        f"oneDNN is off: runtime.cpu_kernels {cfg.runtime.cpu_kernels}, "
        f"{ENV}={os.environ.get(ENV, 'unset')}")


def record(requested: str, dtype: str = "float32",
           num_gpus: int = 0) -> Dict[str, Any]:
    """result.json's environment fields: what was asked, what TensorFlow
    reports, the variable as this process has it, and what bf16_on_eigen
    says (None: nothing to add)."""
    enabled = onednn_enabled()
    return {"cpu_kernels": requested, "onednn_enabled": enabled,
            "tf_enable_onednn_opts": os.environ.get(ENV),
            "cpu_kernels_note": bf16_on_eigen(
                dtype, num_gpus, cpu_features.read_flags(), enabled)}


def summary_note(recorded: Mapping[str, Any]) -> str:
    """kernels_note from a run's environment fields (`record`), so the
    summary line says what result.json says."""
    return _note_text(recorded["cpu_kernels"], recorded["onednn_enabled"],
                      recorded["cpu_kernels_note"])


def bf16_warning(dtype: str, num_gpus: int,
                 flags: Optional[cpu_features.Flags],
                 onednn: Optional[bool] = None) -> Optional[str]:
    """One line for a bfloat16 run on the CPU that will crawl: the cores
    lack bf16 units (no AVX512_BF16, no AMX), so bfloat16 is emulated, many
    times slower than float32; or they have them but oneDNN is off
    (`onednn` False, TensorFlow's answer), and Eigen's kernels do not use
    them. None when the run is on GPUs, not bfloat16, or nothing is
    known."""
    if dtype != "bfloat16" or num_gpus > 0:
        return None
    units = cpu_features.has_bf16_units(flags)
    if units is False:
        return (f"official_bench: bfloat16 on a CPU without bf16 units (no "
                f"avx512_bf16 or amx_bf16 flag in {cpu_features.CPUINFO}) "
                f"is emulated: expect it about {BF16_SLOWDOWN}x slower than "
                "float32 (issue 31: Model Garden's ResNet-50 ran at 0.10 "
                "img/s in bfloat16 against ~2.7 img/s in float32 on a "
                "2-core AVX2 EPYC); use float32 on this CPU")
    if units and onednn is False:
        return (f"official_bench: bfloat16 with oneDNN off: Eigen's kernels "
                f"do not use this CPU's bf16 units and ran about "
                f"{BF16_EIGEN_SLOWDOWN}x slower than oneDNN's (BENCHMARKS.md, "
                "CPU kernels: ResNet-50 128x128 on an AVX512_BF16 EPYC); set "
                "runtime.cpu_kernels to onednn or auto")
    return None
