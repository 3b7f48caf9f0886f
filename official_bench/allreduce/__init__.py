"""All-reduce: the bandwidth benchmark and what a step's communication costs.

    bench.py         the bandwidth benchmark (official-bench-allreduce)
    bandwidth.py     bandwidth as nccl-tests defines it, and its log line
    collectives.py   how many collectives one step issues (traced step)
    in_step.py       the step's communication timed as training runs it
    compute_wait.py  how much slower compute is right after a wait

The scaling model the extractor predicts with from these numbers is
extract/scaling.py (TensorFlow-free, beside the extractor)."""
