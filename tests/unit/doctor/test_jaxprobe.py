"""The jax probe's output read back (doctor/jaxprobe.py): its marked JSON
line, a child that died, and the words of the jax row. The child itself
runs in test_doctor_jax.py's real doctor run."""

import json

from official_bench.doctor import jaxprobe
from support.doctor_facts import jax_facts


def test_parse_reads_the_marked_line_among_jax_warnings():
    facts = jax_facts(2)
    stdout = ("WARNING: something JAX says\n" + jaxprobe.MARK +
              json.dumps(facts) + "\n")
    assert jaxprobe.parse(stdout, "E0000 cuInit failed\n", 0) == (facts,
                                                                  None)


def test_parse_names_the_last_error_line_of_a_child_that_failed():
    facts, error = jaxprobe.parse(
        "", "Traceback (most recent call last):\n  ...\n"
        "ModuleNotFoundError: No module named 'jax'\n\n", 1)
    assert facts is None
    assert error == ("JAX probe failed (exit 1): ModuleNotFoundError: No "
                     "module named 'jax'")
    assert jaxprobe.parse(jaxprobe.MARK + "{not json", "", 0) == (
        None, f"JAX probe failed (exit 0): {jaxprobe.MARK}{{not json")
    assert jaxprobe.parse("", "", -9) == (
        None, "JAX probe failed (exit -9): exit status -9")


def test_usable_needs_keras_3_and_summary_names_versions_and_plugin():
    assert jaxprobe.usable(jax_facts(0))
    assert not jaxprobe.usable(None)
    assert not jaxprobe.usable(jax_facts(0, keras=None))
    assert not jaxprobe.usable(jax_facts(0, keras="2.15.0"))
    assert jaxprobe.summary(jax_facts(8)) == (
        "JAX 0.11.2 (jaxlib 0.11.2, jax-cuda13-plugin 0.11.2, "
        "jax-cuda13-pjrt 0.11.2), Keras 3.15.1; default backend gpu, "
        "8 device(s)")
    assert "no CUDA plugin" in jaxprobe.summary(jax_facts(0))
    assert jaxprobe.PLUGIN_NAME.match("jax_cuda12_plugin")
    assert not jaxprobe.PLUGIN_NAME.match("jax-cuda12-pjrt-extra")


def test_capability_from_jax_device_attribute():
    assert jaxprobe._capability("9.0") == [9, 0]
    assert jaxprobe._capability("12.0") == [12, 0]
    assert jaxprobe._capability(None) is None
