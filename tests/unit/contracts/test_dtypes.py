"""One precision table: every layer converts through contracts.dtypes."""

import pytest

from official_bench import config
from official_bench.contracts import dtypes, result_json
from official_bench.extract import logparse
from official_bench.launch import settings


def test_both_spellings_and_policy_names_convert_both_ways():
    for short, long in zip(dtypes.SHORT_NAMES, dtypes.TF_NAMES):
        for spelling in (short, long, f"mixed_{long}"):
            assert dtypes.tf_name(spelling) == long
            assert dtypes.TO_SHORT[spelling] == short
    assert dtypes.TO_SHORT["amp"] == "fp16"
    with pytest.raises(KeyError):
        dtypes.tf_name("fp64")


def test_layers_share_the_table():
    """The launcher, the extractor and config read the same names, so a new
    precision added to the contract reaches all three."""
    assert settings.DTYPES == logparse.DTYPES == dtypes.SHORT_NAMES
    assert set(config.DTYPE_ALIASES) == set(dtypes.ACCEPTED)
    result = result_json.RunResultFile(path="x", intervals=[],
                                   environment={"dtype": "mixed_bfloat16"})
    assert result.dtype == "bf16"
