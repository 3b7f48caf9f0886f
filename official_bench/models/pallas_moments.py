"""Per-channel sums of (x - shift) and (x - shift)^2 over the rows of a
(rows, channels) activation, in one Pallas kernel (bn_statistics: pallas).

Each program reads a (rows_per_program, channel_block) tile of x once, in
x's own dtype, accumulates both sums in float32 and writes one row of
partial sums; XLA adds the partial rows, and sums the rows left below
the last whole program (a batch of 400 at 7x7: 19,600 rows, 144 left).
On GPUs the kernel is lowered through Triton; on CPUs, and for shapes the
tiles cannot cover (channels without a power-of-two factor of 16, fewer
rows than one tile), jax.numpy does the same arithmetic (the tests run
the kernel in Pallas' interpreter). The gradient is written out (a custom
VJP): elementwise, so XLA fuses it. Tile sizes and Triton's parameters
are a Tuning (first guesses, untuned); `tuned` sets them for the kernels
traced inside it (benchmarks/jax_step_ab.py's kernel candidates).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Iterator, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from official_bench.models import jax_axes


@dataclasses.dataclass(frozen=True)
class Tuning:
    """The kernel's tiles and Triton parameters, read when it is traced."""
    tile_elements: int = 2048  # one loop step's tile: rows x channel block
    max_channel_block: int = 128
    max_steps: int = 32  # loop steps per program
    # Fewer steps than this where the programs tile the rows exactly (rows
    # with a small power-of-two factor): whole programs and a tail instead.
    min_exact_steps: int = 8
    num_warps: int = 4
    num_stages: int = 2

    def problems(self) -> list:
        """What is out of range, one phrase per field."""
        bad = []
        for name in ("tile_elements", "max_channel_block", "num_warps"):
            value = getattr(self, name)
            if value < 1 or value & (value - 1):
                bad.append(f"{name} {value} is not a power of two")
        if self.max_channel_block < 16:
            bad.append(f"max_channel_block {self.max_channel_block} is "
                       "below 16")
        if self.tile_elements < self.max_channel_block:
            bad.append(f"tile_elements {self.tile_elements} is below "
                       f"max_channel_block {self.max_channel_block}")
        bad += [f"{name} {getattr(self, name)} is below 1"
                for name in ("max_steps", "min_exact_steps", "num_stages")
                if getattr(self, name) < 1]
        return bad


_TUNING = [Tuning()]


def tuning() -> Tuning:
    """The Tuning kernels traced now use."""
    return _TUNING[-1]


@contextlib.contextmanager
def tuned(**changes: int) -> Iterator[Tuning]:
    """Kernels traced inside use the current Tuning with `changes`.
    ValueError naming an unknown field (and the valid ones) or a value
    out of range."""
    fields = [f.name for f in dataclasses.fields(Tuning)]
    unknown = sorted(set(changes) - set(fields))
    if unknown:
        raise ValueError(f"unknown Pallas kernel setting(s) "
                         f"{', '.join(unknown)}; valid: {', '.join(fields)}")
    new = dataclasses.replace(tuning(), **changes)
    problems = new.problems()
    if problems:
        raise ValueError("Pallas kernel settings: " + "; ".join(problems))
    _TUNING.append(new)
    try:
        yield new
    finally:
        _TUNING.pop()


class Tiles(NamedTuple):
    """How the kernel walks an (m, c) activation: a grid of programs, each
    `steps` tiles of `rows` x `channels` down one channel block."""
    rows: int  # rows of one loop step
    steps: int  # loop steps per program
    channels: int  # channel block

    def grid(self, m: int, c: int) -> Tuple[int, int]:
        return m // (self.rows * self.steps), c // self.channels

    def covered(self, m: int) -> int:
        """The rows the programs read; jax.numpy sums the rest."""
        return m - m % (self.rows * self.steps)


def _power_of_two_factor(n: int) -> int:
    return n & -n


def tiles(m: int, c: int) -> Optional[Tiles]:
    """The kernel's tiles for an (m, c) activation: whole tiles of
    tile_elements; programs that cover the rows exactly where that gives
    each at least min_exact_steps steps, else max_steps steps (or all the
    rows hold) and a tail. None where a tile would be too thin to pay or
    the rows fill no tile (jax.numpy then does the sums)."""
    t = tuning()
    channels = min(_power_of_two_factor(c), t.max_channel_block)
    if channels < 16:
        return None
    rows = t.tile_elements // channels
    exact = min(t.max_steps, _power_of_two_factor(m) // rows)
    steps = exact if exact >= t.min_exact_steps \
        else min(t.max_steps, m // rows)
    return Tiles(rows, steps, channels) if steps else None


def _kernel(x_ref, shift_ref, sum_ref, square_ref, *, tile: Tiles):
    shift = shift_ref[...].astype(jnp.float32)

    def step(i, acc):
        total, square = acc
        x = x_ref[pl.ds(i * tile.rows, tile.rows), :]
        x = x.astype(jnp.float32) - shift
        return total + x, square + x * x

    zero = jnp.zeros((tile.rows, tile.channels), jnp.float32)
    total, square = jax.lax.fori_loop(0, tile.steps, step, (zero, zero))
    sum_ref[...] = jnp.sum(total, axis=0, keepdims=True)
    square_ref[...] = jnp.sum(square, axis=0, keepdims=True)


def _pallas_sums(x, shift, tile: Tiles, interpret: bool = False):
    m, c = x.shape
    grid = tile.grid(m, c)
    # Under shard_map (the trainer's step) the partial sums vary over the
    # same mesh axes as x; JAX checks that the kernel's outputs say so.
    partial = jax_axes.shape_like(jax, (grid[0], c), jnp.float32, x)
    one_row = pl.BlockSpec((1, tile.channels), lambda i, j: (i, j))
    extra = {}
    if not interpret:
        from jax.experimental.pallas import triton as pl_triton
        extra["compiler_params"] = pl_triton.CompilerParams(
            num_warps=tuning().num_warps, num_stages=tuning().num_stages)
    total, square = pl.pallas_call(
        functools.partial(_kernel, tile=tile),
        out_shape=(partial, partial),
        grid=grid,
        in_specs=[pl.BlockSpec((tile.rows * tile.steps, tile.channels),
                               lambda i, j: (i, j)),
                  pl.BlockSpec((1, tile.channels), lambda i, j: (0, j))],
        out_specs=(one_row, one_row),
        interpret=interpret,
        name="bn_channel_sums",
        **extra)(x, shift.reshape(1, c))
    total, square = total.sum(axis=0), square.sum(axis=0)
    covered = tile.covered(m)
    if covered < m:  # XLA fuses the slice into its reduction
        rest = _numpy_sums(x[covered:], shift)
        total, square = total + rest[0], square + rest[1]
    return total, square


def compile_error(device, dtype: str = "float16") -> Optional[str]:
    """Why the kernel (not its jax.numpy twin) cannot be compiled for
    `device` reading `dtype`, in one line; None when it can. A small
    (128, 64) activation; about a second on a GPU."""
    tile = tiles(128, 64)
    x = jax.device_put(jnp.zeros((128, 64), dtype), device)
    shift = jax.device_put(jnp.zeros((64,), jnp.float32), device)
    try:
        jax.jit(functools.partial(_pallas_sums, tile=tile)).lower(
            x, shift).compile()
    except Exception as e:  # noqa: BLE001 - XLA's and Triton's own types
        lines = str(e).strip().splitlines() or [type(e).__name__]
        return f"{type(e).__name__}: {lines[0]}"
    return None


def _numpy_sums(x, shift):
    centred = x.astype(jnp.float32) - shift.astype(jnp.float32)
    return centred.sum(axis=0), (centred * centred).sum(axis=0)


def _sums(x, shift):
    tile = tiles(*x.shape)
    if tile is None:
        return _numpy_sums(x, shift)
    # Chosen where the computation is lowered: the kernel through Triton
    # on a GPU; on a CPU, jax.numpy (Pallas' interpreter cannot run under
    # the trainer's shard_map, and would be slow).
    return jax.lax.platform_dependent(
        x, shift, cpu=_numpy_sums,
        default=functools.partial(_pallas_sums, tile=tile))


def centred_sums(x, shift, read_dtype=None):
    """(sum over rows of x - shift, sum of (x - shift)^2), float32, for a
    (rows, channels) x and a (channels,) shift. `read_dtype`: the dtype the
    kernel reads x in, where x is a widened copy (Keras' batch norm casts
    a float16 activation to float32): the cast back is exact, XLA removes
    the pair, and x's gradient stays in x's dtype (rounded once, where the
    layer's other terms are)."""
    # Under shard_map a replicated shift (the moving mean) is made to vary
    # as x does, so that its gradient, which varies, is summed back.
    shift = jax_axes.vary_like(jax, x, shift)
    return _centred_sums(x, shift, jnp.dtype(read_dtype or x.dtype).name)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _centred_sums(x, shift, read_dtype):
    return _sums(x.astype(read_dtype), shift)


def _forward(x, shift, read_dtype):
    total, square = _sums(x.astype(read_dtype), shift)
    return (total, square), (x, shift, total)


def _backward(read_dtype, saved, grads):
    del read_dtype  # the gradient is x's own dtype
    x, shift, total = saved
    g_total, g_square = grads
    m = x.shape[0]
    centred = x.astype(jnp.float32) - shift.astype(jnp.float32)
    dx = g_total + 2.0 * g_square * centred
    dshift = -(g_total * m + 2.0 * g_square * total)
    return dx.astype(x.dtype), dshift.astype(shift.dtype)


_centred_sums.defvjp(_forward, _backward)
