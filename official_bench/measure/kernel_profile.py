"""Where a compiled step's device time goes, from a profiler trace (Chrome
trace JSON, as jax.profiler.trace(create_perfetto_trace=True) writes it)
and XLA's optimised HLO text of the step's module.

Device work is the kernels and copies on a GPU's streams (threads named
"Stream #..." of a "/device:..." process: the derived lines beside them
repeat the same time), or, on a CPU, the thunks carrying an `hlo_op` (not
control flow: a conditional's thunk wraps the traced work it runs).
Each is mapped to its HLO instruction (the `hlo_op` XLA annotates it with,
else the kernel name XLA gave the fusion) and put in one category, first
match wins: collectives; copies (memcpy/memset, copy and pure layout
fusions); convolutions and matrix products (cuDNN/cuBLAS/CUTLASS/Triton
kernel names, convolution/dot instructions, the fusions holding them,
cuDNN/cuBLAS custom calls); the optimizer (an instruction whose op_name,
or one fused into it, carries OPTIMIZER_SCOPE: the profiling script names
the optimizer's stateless_apply so); BN/elementwise (every other fusion
or element-wise op); other. Times are per traced step. Standard library
only.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

OPTIMIZER_SCOPE = "optimizer_stateless_apply"
CONTROL_FLOW = ("conditional", "while", "call")
CATEGORIES = ("convolutions", "BN/elementwise", "optimizer",
              "copies/transfers", "collectives", "other")
_COLLECTIVE = re.compile(r"nccl|all-reduce|all_reduce|allreduce|all-gather|"
                         r"all_gather|reduce-scatter|reduce_scatter|"
                         r"collective-permute|all-to-all", re.I)
_MATMUL_KERNEL = re.compile(r"xmma|cutlass|cudnn|cublas|gemm|implicit_conv|"
                            r"(?<![a-z])conv(?!ert)|wgrad|dgrad|fprop|"
                            r"triton_gemm|^sm\d+_", re.I)
_MATMUL_OPCODES = ("convolution", "dot")
_MATMUL_TARGET = re.compile(r"cudnn\$conv|cudnn\$fusion|cublas|gemm|"
                            r"triton_gemm|__cudnn", re.I)
_LAYOUT_TOKENS = {"copy", "transpose", "bitcast", "reshape", "slice",
                  "concatenate", "pad"}
_FUSION_NOISE = {"fusion", "loop", "input", "output", "wrapped", "kernel"}
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')
_TARGET = re.compile(r'custom_call_target="([^"]*)"')
_CALLS = re.compile(r"calls=%?([\w.\-]+)")
_KIND = re.compile(r"kind=(k\w+)")


@dataclasses.dataclass
class HloOp:
    """One instruction of the optimised HLO."""
    name: str
    opcode: str
    op_name: str = ""
    target: str = ""  # custom_call_target, or a fusion's kind
    calls: str = ""  # a fusion's computation
    fused_op_names: Tuple[str, ...] = ()
    fused_opcodes: Tuple[str, ...] = ()

    @property
    def op_names(self) -> Tuple[str, ...]:
        return (self.op_name,) + self.fused_op_names


def _opcode(rest: str) -> str:
    """The opcode after `name = <type>`: the word before the first '(' that
    follows the type (which may itself be a parenthesised tuple)."""
    depth, i = 0, 0
    if rest.startswith("("):
        for i, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                break
        rest = rest[i + 1:]
    match = re.match(r"\s*\S*?\s*([\w\-]+)\(", rest)
    return match.group(1) if match else ""


def parse_hlo(text: str) -> Dict[str, HloOp]:
    """Every instruction of an HLO text dump by name, with the op_names of
    the instructions fused into it."""
    ops: Dict[str, HloOp] = {}
    members: Dict[str, List[HloOp]] = {}
    computation = ""
    for line in text.splitlines():
        instruction = _INSTRUCTION.match(line)
        if instruction is None:
            header = _COMPUTATION.match(line)
            if header:
                computation = header.group(1)
            continue
        name, rest = instruction.groups()
        opcode = _opcode(rest)
        op_name = _OP_NAME.search(rest)
        target = _TARGET.search(rest) or _KIND.search(rest)
        calls = _CALLS.search(rest) if opcode == "fusion" else None
        ops[name] = HloOp(name, opcode,
                          op_name.group(1) if op_name else "",
                          target.group(1) if target else "",
                          calls.group(1) if calls else "")
        members.setdefault(computation, []).append(ops[name])
    for op in ops.values():
        inside = members.get(op.calls, ()) if op.calls else ()
        op.fused_op_names = tuple(m.op_name for m in inside if m.op_name)
        op.fused_opcodes = tuple(m.opcode for m in inside)
    return ops


@dataclasses.dataclass
class DeviceEvent:
    """One kernel, copy or CPU thunk as traced (microseconds)."""
    name: str
    start: float
    duration: float
    hlo_op: str = ""
    module: str = ""


def load_trace(path: str) -> Dict[str, Any]:
    """A Chrome-trace JSON file, gzipped or not."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def _names(events: Sequence[dict], kind: str) -> Dict[Any, str]:
    return {(e["pid"], e.get("tid")) if kind == "thread_name" else e["pid"]:
            str(e.get("args", {}).get("name", ""))
            for e in events if e.get("ph") == "M" and e.get("name") == kind}


def device_events(trace: Dict[str, Any], module: str = ""
                  ) -> List[DeviceEvent]:
    """The device work in `trace` (module doc); `module`: keep only the
    events XLA tags with another hlo_module out."""
    events = trace.get("traceEvents", [])
    processes = _names(events, "process_name")
    threads = _names(events, "thread_name")
    devices = {pid for pid, name in processes.items()
               if name.startswith("/device:")}
    out = []
    for e in events:
        if e.get("ph") != "X":
            continue
        args = e.get("args") or {}
        if devices:
            if e["pid"] not in devices or not threads.get(
                    (e["pid"], e.get("tid")), "").startswith("Stream"):
                continue
        elif "hlo_op" not in args:
            continue
        tagged = str(args.get("hlo_module", ""))
        if module and tagged and tagged != module:
            continue
        out.append(DeviceEvent(str(e.get("name", "")), float(e["ts"]),
                               float(e.get("dur", 0.0)),
                               str(args.get("hlo_op", "")), tagged))
    return out


def _kernel_name_map(ops: Dict[str, HloOp]) -> Dict[str, str]:
    """XLA names a fusion's GPU kernel after it, '.' as '_'."""
    return {name.replace(".", "_").replace("-", "_"): name for name in ops}


def _layout_only(name: str) -> bool:
    """A fusion named only after data-movement ops (transpose_copy_fusion)."""
    tokens = {t for t in re.split(r"[_.\-]", name)
              if t and not t.isdigit()} - _FUSION_NOISE
    return bool(tokens) and tokens <= _LAYOUT_TOKENS


def categorise(event: DeviceEvent, op: Optional[HloOp],
               optimizer_scope: str = OPTIMIZER_SCOPE) -> str:
    """The event's category (module doc, first match wins)."""
    name, opname = event.name, op.name if op else event.hlo_op
    if _COLLECTIVE.search(name) or _COLLECTIVE.search(opname) or (
            op and _COLLECTIVE.search(op.opcode)):
        return "collectives"
    if name.lower().startswith(("memcpy", "memset")) or (
            op and op.opcode in ("copy", "copy-start", "copy-done")) or \
            _layout_only(opname or name):
        return "copies/transfers"
    if _MATMUL_KERNEL.search(name) or (op and (
            op.opcode in _MATMUL_OPCODES or
            set(op.fused_opcodes) & set(_MATMUL_OPCODES) or
            (op.target and _MATMUL_TARGET.search(op.target)))):
        return "convolutions"
    if op and any(optimizer_scope in n for n in op.op_names):
        return "optimizer"
    if op and op.opcode not in ("custom-call", "sort"):
        return "BN/elementwise"
    return "other"


@dataclasses.dataclass
class KernelRow:
    """One kernel name's time per step, where it comes from."""
    name: str
    category: str
    calls: float  # per step
    us: float  # per step
    hlo_op: str = ""
    op_name: str = ""


@dataclasses.dataclass
class Profile:
    """One traced run's device time per step, by category, kernel and JAX
    op (the op_name path, the same for every precision)."""
    label: str
    steps: int
    busy_us: float  # device time per step (overlaps counted twice)
    span_us: float  # first start to last end of device work, per step
    categories: Dict[str, float]
    kernels: List[KernelRow]
    by_op: Dict[str, float]
    unmapped: int  # events without an HLO instruction

    def as_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Profile":
        data = dict(data, kernels=[KernelRow(**k) for k in data["kernels"]])
        return cls(**data)


def _op_for(event: DeviceEvent, ops: Dict[str, HloOp],
            by_kernel: Dict[str, str]) -> Optional[HloOp]:
    """The HLO instruction behind an event: its hlo_op, else its name."""
    for key in (event.hlo_op, event.name, by_kernel.get(event.name, "")):
        if key and key in ops:
            return ops[key]
    return None


def summarise(trace: Dict[str, Any], ops: Dict[str, HloOp], steps: int,
              label: str = "", module: str = "",
              optimizer_scope: str = OPTIMIZER_SCOPE) -> Profile:
    """The trace's device work per step (ValueError when it has none)."""
    events = device_events(trace, module)
    if not events or steps < 1:
        raise ValueError(
            f"no device events in the trace ({steps} steps): on a GPU, "
            "JAX's profiler traces kernels through CUPTI (the "
            "nvidia-cuda-cupti wheel JAX's CUDA extra installs)")
    by_kernel = _kernel_name_map(ops)
    categories = {c: 0.0 for c in CATEGORIES}
    rows: Dict[str, KernelRow] = {}
    by_op: Dict[str, float] = {}
    unmapped = 0
    for e in events:
        op = _op_for(e, ops, by_kernel)
        if op and op.opcode in CONTROL_FLOW:
            continue  # a CPU thunk around the traced work it runs
        unmapped += op is None
        category = categorise(e, op, optimizer_scope)
        us = e.duration / steps
        categories[category] += us
        row = rows.setdefault(e.name, KernelRow(
            e.name, category, 0.0, 0.0, op.name if op else e.hlo_op,
            op.op_name if op else ""))
        row.calls += 1 / steps
        row.us += us
        key = (op.op_name if op and op.op_name else f"({category})")
        by_op[key] = by_op.get(key, 0.0) + us
    span = max(e.start + e.duration for e in events) - \
        min(e.start for e in events)
    return Profile(label, steps, sum(categories.values()), span / steps,
                   categories, sorted(rows.values(), key=lambda r: -r.us),
                   by_op, unmapped)


def _ms(us: float) -> str:
    return f"{us / 1000:.3f}"


def _short(text: str, width: int = 60) -> str:
    text = text.replace("|", "/")
    return text if len(text) <= width else text[:width - 3] + "..."


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def category_table(profiles: Sequence[Profile]) -> List[str]:
    """Categories in ms per step and share, one column pair per profile
    (and B - A when there are two)."""
    head = "| category | " + " | ".join(
        f"{p.label} ms/step | share" for p in profiles)
    two = len(profiles) == 2
    lines = [head + (" | B - A ms |" if two else " |"),
             "|---" * (1 + 2 * len(profiles) + two) + "|"]
    for c in CATEGORIES + ("total",):
        values = [p.busy_us if c == "total" else p.categories.get(c, 0.0)
                  for p in profiles]
        cells = [f"{_ms(v)} | {_pct(v, p.busy_us)}"
                 for v, p in zip(values, profiles)]
        delta = f" | {(values[1] - values[0]) / 1000:+.3f} |" if two \
            else " |"
        lines.append(f"| {c} | " + " | ".join(cells) + delta)
    return lines


def kernel_table(profile: Profile, top: int = 15) -> List[str]:
    """The `top` kernels by device time per step."""
    lines = ["| kernel | category | HLO op | JAX op | calls/step | "
             "ms/step | share |", "|---|---|---|---|---|---|---|"]
    for r in profile.kernels[:top]:
        lines.append(
            f"| `{_short(r.name)}` | {r.category} | {_short(r.hlo_op, 30)} "
            f"| {_short(r.op_name.split('/', 1)[-1], 50)} | {r.calls:.1f} "
            f"| {_ms(r.us)} | {_pct(r.us, profile.busy_us)} |")
    return lines


def difference_table(a: Profile, b: Profile, top: int = 12) -> List[str]:
    """The JAX ops whose device time differs most between two profiles."""
    keys = sorted(set(a.by_op) | set(b.by_op),
                  key=lambda k: -abs(b.by_op.get(k, 0) - a.by_op.get(k, 0)))
    lines = [f"| JAX op | {a.label} ms | {b.label} ms | B - A ms |",
             "|---|---|---|---|"]
    for k in keys[:top]:
        x, y = a.by_op.get(k, 0.0), b.by_op.get(k, 0.0)
        lines.append(f"| {_short(k.split('/', 1)[-1] if '/' in k else k, 70)}"
                     f" | {_ms(x)} | {_ms(y)} | {(y - x) / 1000:+.3f} |")
    return lines


def _summary(p: Profile) -> str:
    idle = max(0.0, p.span_us - p.busy_us)
    return (f"{p.label}: {p.steps} traced step(s), device busy "
            f"{_ms(p.busy_us)} ms per step of a {_ms(p.span_us)} ms span "
            f"(gaps {_ms(idle)} ms), {len(p.kernels)} kernel names, "
            f"{p.unmapped} event(s) without an HLO instruction")


def markdown(*profiles: Profile, top: int = 15) -> str:
    """The tables for BENCHMARKS.md: categories (side by side), each
    profile's top kernels, and with two profiles the JAX ops that differ
    most (A is the first)."""
    out = [f"- {_summary(p)}" for p in profiles] + [""]
    out += category_table(profiles) + [""]
    for p in profiles:
        out += [f"Top {top} kernels, {p.label}:", ""] + \
            kernel_table(p, top) + [""]
    if len(profiles) == 2:
        out += [f"Largest differences by JAX op ({profiles[1].label} - "
                f"{profiles[0].label}):", ""] + \
            difference_table(*profiles) + [""]
    return "\n".join(out)
