"""A GPU-shaped profiler trace and the optimised HLO text it runs, for the
kernel-profile tests (tests/unit/measure/test_kernel_profile.py) and the
profiling script's (tests/unit/test_gpu_speed_scripts.py)."""

import os

from support.helpers import REPO

# A hand-made optimised HLO module: a cuDNN convolution, a BN fusion, an
# optimizer fusion (its multiply carries the scope), a layout copy, an
# all-reduce and a sort.
HLO = os.path.join(REPO, "tests", "fixtures", "kernel_profile",
                   "step_after_optimizations.txt")


def _x(pid, tid, name, ts, dur, **args):
    return {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": ts,
            "dur": dur, "args": args}


def _meta(kind, pid, name, tid=None):
    event = {"ph": "M", "pid": pid, "name": kind, "args": {"name": name}}
    if tid is not None:
        event["tid"] = tid
    return event


def gpu_trace(scale=1.0):
    """Two steps of a GPU trace: per step a 100 us cuDNN conv (two
    kernels), a 30 us BN fusion, a 20 us optimizer fusion, 10 us of
    layout copy, 8 us memcpy, 5 us all-reduce, 2 us sort; plus what must
    not count. `scale` stretches the conv (a second profile)."""
    mod = {"hlo_module": "jit_replica_train"}
    events = [_meta("process_name", 1, "/host:CPU"),
              _meta("process_name", 7, "/device:GPU:0"),
              _meta("thread_name", 7, "Stream #13(Kernel,MemcpyH2D)", 13),
              _meta("thread_name", 7, "Stream #14(Kernel)", 14),
              _meta("thread_name", 7, "XLA Ops", 99)]
    for step in range(2):
        t = 1000.0 * step
        events += [
            _x(7, 13, "sm90_xmma_fprop_implicit_gemm_f16f16", t, 60 * scale,
               hlo_op="cudnn-conv.1", **mod),
            _x(7, 13, "cudnn::nchwToNhwcKernel", t + 60, 40 * scale,
               hlo_op="cudnn-conv.1", **mod),
            _x(7, 13, "loop_add_fusion_2", t + 200, 30, **mod),  # by name
            _x(7, 14, "loop_subtract_fusion_5", t + 240, 20,
               hlo_op="loop_subtract_fusion.5", **mod),
            _x(7, 14, "transpose_copy_fusion_7", t + 300, 10,
               hlo_op="transpose_copy_fusion.7", **mod),
            _x(7, 13, "MemcpyH2D", t + 320, 8),
            _x(7, 14, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 330, 5,
               hlo_op="all-reduce.3", **mod),
            _x(7, 14, "cub_sort_kernel", t + 340, 2, hlo_op="sort.1", **mod),
            # not counted: a derived line, the host, another module
            _x(7, 99, "cudnn-conv.1", t, 100, hlo_op="cudnn-conv.1", **mod),
            _x(1, 5, "cudnn-conv.1", t, 100, hlo_op="cudnn-conv.1", **mod),
            _x(7, 13, "loop_add_fusion_2", t + 500, 999,
               hlo_module="jit_something_else"),
        ]
    return {"traceEvents": events}


