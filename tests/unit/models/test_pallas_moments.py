"""models/pallas_moments.py: the batch-norm sums kernel (bn_statistics:
pallas). The tile choice for every batch norm of ResNet-50 at batch 256
and 400 (here); in one child Python on 2 CPU devices: the kernel's sums
(in Pallas' interpreter) against float64 NumPy, with an offset and in
float16, with rows left to a tail, and a shape the tiles cannot cover;
the custom gradient against jax.numpy's; under shard_map (the trainer's
step), per-device sums, the replicated shift's gradient summed over
devices, and JAX accepting the GPU kernel's outputs; the Triton lowering
for a GPU (done on the CPU: the kernel is built for every ResNet-50
batch-norm shape at both batches, none left to jax.numpy, and with the
tiles and Triton settings `tuned` sets); and XLA
removing the float32 round trip a mixed_float16 activation makes before
the kernel.
"""

import re

import numpy as np
import pytest

from support.helpers import keras3_child

# (channels, height) of every ResNet-50 v1.5 batch norm: the stem's
# 112x112x64, then each stage's widths at its resolutions (a stage's
# first 1x1 convolution runs before the strided 3x3).
RESNET50_BN = [(64, 112), (64, 56), (256, 56), (128, 56), (128, 28),
               (512, 28), (256, 28), (256, 14), (1024, 14), (512, 14),
               (512, 7), (2048, 7)]


def resnet50_shapes(batch):
    """(rows, channels) of every ResNet-50 batch norm at `batch` images."""
    return [(batch * h * h, c) for c, h in RESNET50_BN]


RESNET50_B256 = resnet50_shapes(256)
# MLPerf's H200 batch: rows with a power-of-two factor of 16 at 7x7
RESNET50_B400 = resnet50_shapes(400)
H200_SMS = 132
# Settings the tuned lowering is checked with (the default first)
TUNED = {"default": {},
         "tuned": {"tile_elements": 4096, "num_warps": 8, "num_stages": 3}}


def _sums_reference(x, shift):
    centred = x.astype("float64") - shift.astype("float64")
    return centred.sum(axis=0), (centred * centred).sum(axis=0)


def _relative(got, want):
    return float(np.abs(np.asarray(got, "float64") - want).max()
                 / np.abs(want).max())


def _triton_calls(jax, pm, shape, dtype):
    """The kernels a GPU lowering of centred_sums on `shape` calls."""
    x = jax.ShapeDtypeStruct(shape, dtype)
    shift = jax.ShapeDtypeStruct(shape[1:], "float32")
    text = jax.jit(pm.centred_sums).trace(x, shift).lower(
        lowering_platforms=("cuda",)).as_text()
    return re.findall(r"custom_call @([\w$.]+)", text)


def _triton_settings(jax, pm, **tuning):
    """The Triton kernel's grid and parameters in a GPU lowering of
    centred_sums on (4096, 64) float16 traced inside tuned(**tuning)."""
    x = jax.ShapeDtypeStruct((4096, 64), "float16")
    shift = jax.ShapeDtypeStruct((64,), "float32")
    with pm.tuned(**tuning):
        # a new function: jit would reuse an earlier trace of the same one
        text = jax.jit(lambda a, b: pm.centred_sums(a, b)).trace(
            x, shift).lower(lowering_platforms=("cuda",)).as_text()
    return {k: [int(v) for v in re.findall(rf"{k} = (\d+) : i32", text)]
            for k in ("grid_x", "num_warps", "num_stages")}


def _loop_state_dtypes(jax, pm, rows, channels):
    """The dtypes of the (rows, channels) arrays the compiled interpreter
    loop carries when the kernel is given float16 cast to float32 and
    back (what the mixed_float16 batch norm hands it)."""
    tile = pm.tiles(rows, channels)

    def call(x):
        back = x.astype("float32").astype("float16")
        return pm._pallas_sums(back, np.zeros(channels, "float32"), tile,
                               interpret=True)
    hlo = jax.jit(call).lower(np.ones((rows, channels), "float16")
                              ).compile().as_text()
    loops = [line for line in hlo.splitlines() if " while(" in line]
    return sorted(set(re.findall(rf"(\w+)\[{rows},{channels}\]",
                                 " ".join(loops))))


def _weighted(sums):
    """A scalar of both sums, each channel weighted differently."""
    def loss(x, shift):
        weights = np.arange(1, x.shape[1] + 1, dtype="float32")
        total, square = sums(x, shift)
        return (total * weights + square * weights ** 2).sum()
    return loss


def _on_two_devices(jax, pm, x, shift):
    """Per-device sums and the gradients of a psum of the weighted sums,
    x split over 2 devices' batch axis, the shift replicated."""
    from jax.sharding import Mesh, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:2]), ("batch",))

    def replica(v, s):
        sums = [t[None] for t in pm.centred_sums(v, s)]
        grads = jax.grad(lambda a, b: jax.lax.psum(
            _weighted(pm.centred_sums)(a, b), "batch"), argnums=(0, 1))(v, s)
        return sums, grads
    run = jax.jit(jax.shard_map(replica, mesh=mesh,
                                in_specs=(P("batch"), P()),
                                out_specs=(P("batch"), (P("batch"), P()))))
    gpu = run.trace(jax.ShapeDtypeStruct(x.shape, x.dtype),
                    jax.ShapeDtypeStruct(shift.shape, shift.dtype)).lower(
                        lowering_platforms=("cuda",)).as_text()
    return run(x, shift), re.findall(r"custom_call @([\w$.]+)", gpu)


def _preflight(jax, pm):
    """The trainer's check that the kernel compiles, on a device where it
    cannot (a CPU: Pallas compiles nothing for it) posing as a GPU; and
    where the trainer does not check."""
    import types

    from official_bench import config as C
    from official_bench.jax_backend import trainer
    device = jax.devices()[0]
    out = {"compile_error": pm.compile_error(device), "said": []}
    trainer.logging.info = lambda fmt, *a: out["said"].append(fmt % a)
    for statistics, platform in (("pallas", "gpu"), ("pallas", "cpu"),
                                 ("one_pass", "gpu")):
        cfg = C.load_config(params_override=(
            "runtime.backend=jax,"
            f"model.model_params.bn_statistics={statistics}"))
        run = types.SimpleNamespace(platform=platform, local_devices=[device],
                                    jax=jax)
        try:
            trainer._check_kernels(cfg, run)
            out[f"{statistics}-{platform}"] = None
        except C.ConfigError as e:
            out[f"{statistics}-{platform}"] = str(e)
    return out


def kernel_in_child():
    """In the child: every measurement the tests below read."""
    import json

    import jax

    from official_bench.models import pallas_moments as pm

    rng = np.random.default_rng(0)
    out = {}
    x = (rng.standard_normal((2048, 64)) * 2 + 40).astype("float16")
    shift = np.full(64, 39.5, "float32")
    want = _sums_reference(x, shift)
    got = jax.jit(lambda a, b: pm._pallas_sums(
        a, b, pm.tiles(*a.shape), interpret=True))(x, shift)
    out["kernel_float16"] = [_relative(g, w) for g, w in zip(got, want)]
    # rows no whole number of programs covers: 576 in the kernel, 24 left
    tail = x[:600]
    got = jax.jit(lambda a, b: pm._pallas_sums(
        a, b, pm.tiles(*a.shape), interpret=True))(tail, shift)
    out["kernel_tail"] = [_relative(g, w) for g, w in zip(
        got, _sums_reference(tail, shift))]
    odd = rng.standard_normal((50, 24)).astype("float32")
    got = jax.jit(pm.centred_sums)(odd, np.zeros(24, "float32"))
    out["sums_untiled"] = [_relative(g, w) for g, w in zip(
        got, _sums_reference(odd, np.zeros(24)))]

    x32 = x.astype("float32")
    grads = jax.grad(_weighted(pm.centred_sums), argnums=(0, 1))(x32, shift)
    want = jax.grad(_weighted(pm._numpy_sums), argnums=(0, 1))(x32, shift)
    out["grads"] = [_relative(g, np.asarray(w, "float64"))
                    for g, w in zip(grads, want)]
    # read as float16 (x32 holds float16 values): the same gradient, in
    # x's float32
    read16 = jax.grad(_weighted(lambda a, b: pm.centred_sums(
        a, b, read_dtype="float16")), argnums=(0, 1))(x32, shift)
    out["grads_read16"] = [_relative(g, np.asarray(w, "float64"))
                           for g, w in zip(read16, want)]
    out["grads_read16_dtype"] = str(read16[0].dtype)

    (sums, grads), out["shard_map_gpu"] = _on_two_devices(jax, pm, x32,
                                                          shift)
    # 600 rows a device: the kernel's 576 and a tail, under shard_map
    out["shard_map_gpu_tail"] = _on_two_devices(jax, pm, x32[:1200],
                                                shift)[1]
    halves = [_sums_reference(h, shift) for h in np.split(x32, 2)]
    out["shard_map_sums"] = [_relative(sums[k][d], halves[d][k])
                             for d in range(2) for k in range(2)]
    out["shard_map_grads"] = [_relative(g, np.asarray(w, "float64"))
                              for g, w in zip(grads, want)]

    out["triton"] = {f"{m}x{c}-{dtype}": _triton_calls(jax, pm, (m, c), dtype)
                     for m, c in RESNET50_B256 for dtype in ("float16",
                                                             "bfloat16")}
    out["triton_b400"] = {f"{m}x{c}": _triton_calls(jax, pm, (m, c),
                                                    "float16")
                          for m, c in RESNET50_B400}
    out["triton_untiled"] = _triton_calls(jax, pm, (50, 24), "float32")
    out["triton_tuned"] = {name: _triton_settings(jax, pm, **tuning)
                           for name, tuning in TUNED.items()}
    out["loop_state"] = _loop_state_dtypes(jax, pm, 4096, 32)
    out["preflight"] = _preflight(jax, pm)
    print(json.dumps(out))


@pytest.fixture(scope="module")
def measured():
    return keras3_child(__file__, "kernel_in_child", cpu_devices=2)


@pytest.mark.parametrize("rows,channels", RESNET50_B256)
def test_every_resnet50_batch_norm_is_tiled_and_fills_an_h200(rows,
                                                               channels):
    from official_bench.models.pallas_moments import Tuning, tiles
    tile = tiles(rows, channels)
    assert tile is not None
    for n in (tile.rows, tile.channels):
        assert n & (n - 1) == 0, tile  # Triton's blocks: powers of two
    assert tile.rows * tile.channels == Tuning().tile_elements
    assert rows % (tile.rows * tile.steps) == 0  # no tail at batch 256
    assert tile.covered(rows) == rows
    assert channels % tile.channels == 0
    programs = tile.grid(rows, channels)
    assert programs[0] * programs[1] >= H200_SMS, programs


@pytest.mark.parametrize("rows,channels", RESNET50_B400)
def test_batch_400_gets_whole_tiles_and_a_short_tail(rows, channels):
    # 400 = 16 x 25: at 7x7 tiles that divide the rows would be 16 rows a
    # program; the kernel takes whole programs and XLA the rest.
    from official_bench.models.pallas_moments import Tuning, tiles
    tile = tiles(rows, channels)
    t = Tuning()
    assert tile.rows * tile.channels == t.tile_elements
    assert t.min_exact_steps <= tile.steps <= t.max_steps, tile
    left = rows - tile.covered(rows)
    assert 0 <= left < tile.rows * tile.steps
    assert left <= rows // 100, (tile, left)  # the tail: under 1%
    programs = tile.grid(rows, channels)
    assert programs[0] * programs[1] >= H200_SMS, programs
    if rows == 400 * 7 * 7:
        assert (tile.steps, left) == (32, 144)


@pytest.mark.parametrize("rows,channels", [(600, 64), (50, 64)])
def test_rows_no_program_covers_are_a_tail(rows, channels):
    from official_bench.models.pallas_moments import tiles
    tile = tiles(rows, channels)
    assert tile.rows == 32 and tile.steps == rows // 32
    assert tile.grid(rows, channels) == (1, 1)
    assert rows - tile.covered(rows) == rows % 32


def test_tuned_sets_the_tiles_inside_and_restores_them():
    from official_bench.models import pallas_moments as pm
    before = pm.tiles(4096, 64)
    with pm.tuned(tile_elements=4096) as outer:
        assert outer.tile_elements == 4096 and outer.num_warps == 4
        assert pm.tiles(4096, 64) == pm.Tiles(64, 32, 64)
        with pm.tuned(max_steps=8, num_warps=8):
            assert pm.tiles(4096, 64) == pm.Tiles(64, 8, 64)
            assert pm.tuning().tile_elements == 4096  # the outer's kept
        assert pm.tiles(4096, 64) == pm.Tiles(64, 32, 64)
    assert pm.tiles(4096, 64) == before == pm.Tiles(32, 32, 64)
    assert pm.tuning() == pm.Tuning()


def test_tuned_refuses_unknown_settings_and_values_out_of_range():
    from official_bench.models import pallas_moments as pm
    with pytest.raises(ValueError) as e:
        with pm.tuned(warps=8):
            pass
    assert str(e.value) == (
        "unknown Pallas kernel setting(s) warps; valid: tile_elements, "
        "max_channel_block, max_steps, min_exact_steps, num_warps, "
        "num_stages")
    with pytest.raises(ValueError) as e:
        with pm.tuned(tile_elements=3000, num_warps=6, num_stages=0):
            pass
    assert str(e.value) == (
        "Pallas kernel settings: tile_elements 3000 is not a power of two; "
        "num_warps 6 is not a power of two; num_stages 0 is below 1")
    with pytest.raises(ValueError, match="tile_elements 64 is below "
                                         "max_channel_block 128"):
        with pm.tuned(tile_elements=64):
            pass
    assert pm.tuning() == pm.Tuning()  # nothing left set


@pytest.mark.parametrize("rows,channels", [(31, 64), (4096, 24), (7, 48)])
def test_shapes_the_tiles_cannot_cover_are_left_to_jax_numpy(rows, channels):
    from official_bench.models.pallas_moments import tiles
    assert tiles(rows, channels) is None


def test_the_kernel_sums_match_float64(measured):
    # mean 40, shift 39.5: the shifted float32 sums of float16 input, the
    # kernel in Pallas' interpreter
    assert max(measured["kernel_float16"]) < 1e-6, measured["kernel_float16"]
    assert max(measured["kernel_tail"]) < 1e-6, measured["kernel_tail"]
    assert max(measured["sums_untiled"]) < 1e-6, measured["sums_untiled"]


def test_the_custom_gradient_is_jax_numpys(measured):
    # d/dx and d/dshift of a weighted sum of both outputs
    assert len(measured["grads"]) == 2
    assert max(measured["grads"]) < 1e-6, measured["grads"]
    # x read as float16 by the kernel, its gradient still x's float32
    assert max(measured["grads_read16"]) < 1e-6, measured["grads_read16"]
    assert measured["grads_read16_dtype"] == "float32"


def test_under_shard_map_each_device_sums_its_rows_and_the_shift_grads_add(
        measured):
    assert len(measured["shard_map_sums"]) == 4
    assert max(measured["shard_map_sums"]) < 1e-6, measured["shard_map_sums"]
    # the replicated shift's gradient: both devices' parts, summed
    assert len(measured["shard_map_grads"]) == 2
    assert max(measured["shard_map_grads"]) < 1e-6, \
        measured["shard_map_grads"]
    # and the trainer's shard_map accepts the GPU kernel's outputs
    # (the sums and the gradient's forward: one kernel each)
    assert measured["shard_map_gpu"] == ["__gpu$xla.gpu.triton"] * 2
    assert measured["shard_map_gpu_tail"] == ["__gpu$xla.gpu.triton"] * 2


def test_a_gpu_lowering_builds_one_triton_kernel_for_every_resnet50_shape(
        measured):
    assert len(measured["triton"]) == 2 * len(RESNET50_B256)
    for shape, calls in measured["triton"].items():
        assert calls == ["__gpu$xla.gpu.triton"], shape
    # batch 400: the kernel, its tail in XLA's reductions
    assert len(measured["triton_b400"]) == len(RESNET50_B400)
    for shape, calls in measured["triton_b400"].items():
        assert calls == ["__gpu$xla.gpu.triton"], shape
    assert measured["triton_untiled"] == []  # jax.numpy's reductions


def test_a_tuned_kernel_is_lowered_with_its_tiles_and_triton_settings(
        measured):
    # (4096, 64): 32-row tiles, 32 steps, 4 programs by default; tiles of
    # 4,096 elements halve the programs
    tuned = measured["triton_tuned"]
    assert tuned["default"] == {"grid_x": [4], "num_warps": [4],
                                "num_stages": [2]}
    assert tuned["tuned"] == {"grid_x": [2], "num_warps": [8],
                              "num_stages": [3]}


def test_xla_removes_the_float32_round_trip_before_the_kernel(measured):
    # Keras casts a float16 input to float32 and the layer casts it back
    # (test_bn_statistics); XLA removes the pair, so the kernel's loop
    # reads the float16 activation, no float32 copy of it.
    assert measured["loop_state"] == ["f16"], measured["loop_state"]


def test_a_kernel_that_does_not_compile_is_one_line_naming_the_key(measured):
    pre = measured["preflight"]
    assert "interpret" in pre["compile_error"]  # Pallas' CPU refusal
    line = pre["pallas-gpu"]
    assert line.startswith("model.model_params.bn_statistics: pallas: the "
                           "Pallas kernel does not compile on "), line
    assert pre["compile_error"] in line and "use one_pass or two_pass" in line
    assert "\n" not in line
    # CPUs run jax.numpy's sums, and say so once; one_pass has no kernel
    assert pre["pallas-cpu"] is None and pre["one_pass-gpu"] is None
    assert pre["said"] == [
        "official_bench: bn_statistics pallas on cpu: the batch-norm sums "
        "come from jax.numpy (one_pass' arithmetic); the Pallas kernel is "
        "for GPUs"]
