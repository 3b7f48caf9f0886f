"""measure/kernel_profile.py: a GPU-shaped trace (support/kernel_traces.py:
a device process with stream lines and a derived line, host events,
another module's kernel) read against a small HLO text, every category
exercised;
and a real CPU trace and HLO dump of a tiny jitted step captured by JAX in
a child Python, read the same way."""

import gzip
import json
import os

import pytest

from official_bench.measure import kernel_profile as kp
from support.helpers import keras3_child
from support.kernel_traces import HLO, gpu_trace

SCOPE = kp.OPTIMIZER_SCOPE
@pytest.fixture
def ops():
    with open(HLO, encoding="utf-8") as f:
        return kp.parse_hlo(f.read())


def test_the_hlo_text_is_read_with_its_fused_instructions(ops):
    conv = ops["cudnn-conv.1"]
    assert (conv.opcode, conv.target) == ("custom-call",
                                          "__cudnn$convForward")
    assert conv.op_name.endswith("jvp(stem_conv)/conv_general_dilated")
    update = ops["loop_subtract_fusion.5"]
    assert (update.opcode, update.target, update.calls) == (
        "fusion", "kLoop", "fused_computation.5")
    assert update.fused_opcodes == ("parameter", "parameter", "multiply",
                                    "subtract")
    assert any(SCOPE in n for n in update.fused_op_names)
    assert ops["p0"].op_name == "images" and ops["sort.1"].opcode == "sort"


def test_each_kernel_lands_in_its_category(ops):
    p = kp.summarise(gpu_trace(), ops, steps=2, label="fp16",
                     module="jit_replica_train")
    assert p.categories == {"convolutions": 100.0, "BN/elementwise": 30.0,
                            "optimizer": 20.0, "copies/transfers": 18.0,
                            "collectives": 5.0, "other": 2.0}
    assert p.busy_us == 175.0 and p.unmapped == 2  # the memcpys
    assert p.span_us == (1342.0 - 0.0) / 2
    top = p.kernels[0]
    assert (top.name, top.category, top.calls, top.us, top.hlo_op) == (
        "sm90_xmma_fprop_implicit_gemm_f16f16", "convolutions", 1.0, 60.0,
        "cudnn-conv.1")
    by_name = {k.name: k for k in p.kernels}
    assert by_name["loop_add_fusion_2"].hlo_op == "loop_add_fusion.2"
    assert by_name["loop_add_fusion_2"].category == "BN/elementwise"
    conv_op = "jit(replica_train)/jvp(stem_conv)/conv_general_dilated"
    assert p.by_op[conv_op] == 100.0
    assert p.by_op["(copies/transfers)"] == 18.0


def test_the_tables_side_by_side(ops):
    a = kp.summarise(gpu_trace(), ops, 2, "fp16", "jit_replica_train")
    b = kp.summarise(gpu_trace(scale=1.5), ops, 2, "bf16",
                     "jit_replica_train")
    assert kp.Profile.from_dict(json.loads(json.dumps(b.as_dict()))) == b
    text = kp.markdown(a, b, top=3)
    lines = text.splitlines()
    assert "| convolutions | 0.100 | 57.1% | 0.150 | 66.7% | +0.050 |" \
        in lines
    assert "| total | 0.175 | 100.0% | 0.225 | 100.0% | +0.050 |" in lines
    # busy 0.175 ms of a 0.671 ms span per step: gaps 0.496 ms
    assert "span (gaps 0.496 ms)" in lines[0]
    assert sum(l.startswith("| `") for l in lines) == 6  # top 3 each
    diff = lines[lines.index("Largest differences by JAX op (bf16 - "
                             "fp16):") + 4]
    assert diff == ("| jvp(stem_conv)/conv_general_dilated | 0.100 | 0.150 "
                    "| +0.050 |")


def test_a_cpu_control_flow_thunk_is_not_counted_again():
    """A CPU trace (no device process): a conditional's thunk (10 us)
    wraps the dot (6 us) and add (2 us) it runs; 8 us of work, not 18."""
    def thunk(name, ts, dur):
        return {"ph": "X", "pid": 1, "tid": 1, "name": name, "ts": ts,
                "dur": dur, "args": {"hlo_op": name}}
    trace = {"traceEvents": [thunk("conditional.1", 0, 10),
                             thunk("dot.2", 1, 6), thunk("add.3", 7, 2)]}
    ops = {"conditional.1": kp.HloOp("conditional.1", "conditional"),
           "dot.2": kp.HloOp("dot.2", "dot"),
           "add.3": kp.HloOp("add.3", "add")}
    p = kp.summarise(trace, ops, steps=1)
    assert p.busy_us == 8.0
    assert (p.categories["convolutions"], p.categories["BN/elementwise"]) \
        == (6.0, 2.0)


def test_a_trace_without_device_work_is_an_error(ops):
    with pytest.raises(ValueError, match="no device events"):
        kp.summarise({"traceEvents": []}, ops, steps=2)


def capture_on_cpu():
    """In the child: a tiny jitted step (convolution, elementwise, an
    update under the optimizer's scope, a transpose), its HLO dumped by
    XLA_FLAGS and 3 calls traced by jax.profiler."""
    import glob
    out = os.environ["OB_TEST_PROFILE_DIR"]
    os.environ["XLA_FLAGS"] += (f" --xla_dump_to={out}/hlo "
                                "--xla_dump_hlo_as_text "
                                "--xla_dump_hlo_module_re=.*tiny_train.*")
    import jax  # after XLA_FLAGS: XLA reads them when JAX starts
    import jax.numpy as jnp

    def tiny_train(w, x):
        def loss(w):
            y = jax.lax.conv_general_dilated(
                x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO",
                                                         "NHWC"))
            return jnp.sum(jax.nn.relu(y * 1.5 + 0.1) ** 2)
        g = jax.grad(loss)(w)
        with jax.named_scope(kp.OPTIMIZER_SCOPE):
            w = w - 0.01 * g
        return w, jnp.transpose(x, (0, 3, 1, 2)).sum()
    step = jax.jit(tiny_train)
    w, x = jnp.ones((3, 3, 4, 8)), jnp.ones((2, 32, 32, 4))
    w, s = step(w, x)
    s.block_until_ready()
    with jax.profiler.trace(os.path.join(out, "trace"),
                            create_perfetto_trace=True):
        for _ in range(3):
            w, s = step(w, x)
        s.block_until_ready()
    trace, = glob.glob(os.path.join(out, "trace", "plugins", "profile",
                                    "*", "perfetto_trace.json.gz"))
    hlo, = glob.glob(os.path.join(out, "hlo",
                                  "*tiny_train*after_optimizations.txt"))
    print(json.dumps({"trace": trace, "hlo": hlo}))


def test_a_real_cpu_trace_and_dump(tmp_path, monkeypatch):
    monkeypatch.setenv("OB_TEST_PROFILE_DIR", str(tmp_path))
    files = keras3_child(__file__, "capture_on_cpu")
    with open(files["hlo"], encoding="utf-8") as f:
        ops = kp.parse_hlo(f.read())
    trace = kp.load_trace(files["trace"])
    p = kp.summarise(trace, ops, steps=3, label="cpu",
                     module="jit_tiny_train")
    events = kp.device_events(trace, "jit_tiny_train")
    assert p.unmapped == 0 and events
    assert all(e.module == "jit_tiny_train" for e in events)
    assert p.categories["convolutions"] > 0
    assert p.categories["optimizer"] > 0
    assert p.busy_us == pytest.approx(sum(p.categories.values()))
    update = [k for k in p.kernels if k.category == "optimizer"]
    assert all(any(kp.OPTIMIZER_SCOPE in n for n in ops[k.hlo_op].op_names)
               for k in update)
    with gzip.open(files["trace"], "rt") as f:  # the file JAX wrote
        assert json.load(f)["traceEvents"]
