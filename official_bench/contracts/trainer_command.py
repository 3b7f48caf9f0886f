"""The trainer's command line: the module that runs it and the argv that
starts it, built here for every caller that starts a trainer as a child
process (the launcher's plan, the doctor's checks, the A/B runner,
benchmarks/ and the tests), so its flags are spelled once.

The flags are the trainer CLI's own (classifier_trainer.py, Model Garden
r2.3's names), always in one order: --mode, --config_file, --model_dir,
--params_override, then the caller's extra arguments; a flag given as None
is left out. The all-reduce benchmark takes the same flags, so the
launcher builds its command here too, naming its module.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

TRAINER_MODULE = "official_bench.classifier_trainer"


def trainer_argv(python: str, *, mode: Optional[str] = None,
                 config_file: Optional[str] = None,
                 model_dir: Optional[str] = None,
                 params_override: Optional[str] = None,
                 extra: Sequence[str] = (),
                 module: str = TRAINER_MODULE) -> List[str]:
    """``python -m module`` with the given flags, in the order above."""
    argv = [python, "-m", module]
    for flag, value in (("mode", mode), ("config_file", config_file),
                        ("model_dir", model_dir),
                        ("params_override", params_override)):
        if value is not None:
            argv.append(f"--{flag}={value}")
    return argv + list(extra)
