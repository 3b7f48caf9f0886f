"""The scaling model (official_bench/extract/scaling.py) on DLPerf's
published TF 2.3 ResNet-50 numbers, on paper: no run, no GPU.

    .venv/bin/python benchmarks/scaling_on_paper.py

Inputs, all stated here:
- DLPerf's median img/s (docs/dlperf.md's table: V100-SXM2-16GB, TF 2.3, steps
  100-600): 1n1g gives the 1-GPU step T1 = batch / img/s;
- the gradient: ResNet-50 v1.5's 25,557,032 trainable parameters in float32
  (102,228,128 bytes, what `BENCH=allreduce --sizes=model` all-reduces;
  under mixed precision the variables, hence the gradients, stay float32);
- bus bandwidths (assumed, not measured here): within a node over NVLink
  NVLINK_BUSBW; across nodes a 100 Gbit/s link, at line rate (12.5 GB/s)
  and at 6 GB/s, the busbw reported for all_reduce_perf on 4 nodes x 8
  V100 with 100 Gbit/s EDR in NVIDIA/nccl-tests issue 29. The all-reduce
  of S bytes over n ranks takes S x 2(n-1)/n / busbw (nccl-tests'
  definition); across nodes the slowest link bounds the ring.
"""

from official_bench.extract import scaling

PARAMETERS = 25_557_032  # trainable: the gradient's elements
GRADIENT_BYTES = 4 * PARAMETERS
NVLINK_BUSBW = 100.0  # GB/s, V100 SXM2 8-GPU hybrid cube mesh (assumed)
INTER_NODE = {"100 Gbit/s at line rate": 12.5, "6 GB/s (nccl-tests #29)": 6.0}
DLPERF = {  # case: (devices, fp32 bs128 img/s, fp16 bs256 img/s)
    "1n1g": (1, 321.80, 1075.27), "1n8g": (8, 2458.74, 6898.00),
    "2n8g": (16, 4849.68, 9870.15), "4n8g": (32, 9418.44, 19314.31),
}


def allreduce_row(case, devices, busbw):
    """A row as the extractor's allreduce table gives it."""
    seconds = GRADIENT_BYTES * 2 * (devices - 1) / devices / (busbw * 1e9)
    return {"seconds": seconds, "nbytes": int(GRADIENT_BYTES),
            "busbw_gbps": busbw, "dtype": "float32", "model": True}


def main():
    for column, (label, batch) in enumerate((("fp32 bs128", 128),
                                             ("fp16 bs256", 256)), 1):
        t1 = batch / DLPERF["1n1g"][column]
        print(f"\n{label}: 1-GPU step {t1 * 1e3:.1f} ms")
        for case, row in DLPERF.items():
            devices, speed = row[0], row[column]
            if devices == 1:
                continue
            measured = speed / DLPERF["1n1g"][column]
            links = {"NVLink %g GB/s" % NVLINK_BUSBW: NVLINK_BUSBW} \
                if case.startswith("1n") else INTER_NODE
            for link, busbw in links.items():
                m = scaling.explain(case, measured, t1,
                                    allreduce_row(case, devices, busbw),
                                    devices)
                print(f"  [{link}] {m['explanation']}")


if __name__ == "__main__":
    main()
