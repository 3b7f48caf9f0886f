"""Precision names, in both spellings, in one table.

Two spellings meet at the layer boundaries: TensorFlow's (float32, float16,
bfloat16; what a config's `dtype` keys hold after validation) and DLPerf's
short ones (fp32, fp16, bf16; what the run scripts take and what log and
result file names carry). Keras' mixed-precision policies (mixed_float16)
read as their compute dtype. Every module that accepts or prints a
precision converts through here.
"""

from __future__ import annotations

from typing import Dict, Tuple

# (short name, TensorFlow name), in the order reports list them.
_PAIRS: Tuple[Tuple[str, str], ...] = (
    ("fp32", "float32"), ("fp16", "float16"), ("bf16", "bfloat16"))

SHORT_NAMES: Tuple[str, ...] = tuple(short for short, _ in _PAIRS)
TF_NAMES: Tuple[str, ...] = tuple(long for _, long in _PAIRS)

# Every accepted spelling -> TensorFlow name / -> short name.
TO_TF: Dict[str, str] = {}
TO_SHORT: Dict[str, str] = {}
for _short, _long in _PAIRS:
    for _spelling in (_short, _long, f"mixed_{_long}"):
        TO_TF[_spelling] = _long
        TO_SHORT[_spelling] = _short
del _short, _long, _spelling
# DLPerf's run scripts call fp16 "amp" (automatic mixed precision).
TO_SHORT["amp"] = "fp16"

# What a user may write where a precision is asked for (no mixed_ policy
# names: those are Keras' names for a policy, not for a dtype).
ACCEPTED: Tuple[str, ...] = SHORT_NAMES + TF_NAMES


# TensorFlow name -> the Keras dtype policy a run sets (tf-keras and Keras 3
# spell them the same).
KERAS_POLICIES: Dict[str, str] = {long: long if long == "float32"
                                  else f"mixed_{long}" for long in TF_NAMES}


def tf_name(spelling: str) -> str:
    """TensorFlow's name for any accepted spelling; KeyError otherwise."""
    return TO_TF[spelling]
