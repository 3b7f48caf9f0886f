"""official-bench-doctor: checks a machine before any number is trusted.

Run on a GPU machine before benchmarking. It prints a PASS/FAIL/SKIP table
and writes it as JSON; --backend picks the trainer backend it checks (auto:
tensorflow where it imports, else jax):
- tensorflow or jax / gpus: what the backend sees and, if a GPU is missing,
  why and the fix (host/gpu_diagnosis.py, jax_diagnosis.py);
- short synthetic runs on one GPU per precision (x data format x XLA on
  TensorFlow), with GPU utilisation sampled and the loss checked;
- mirrored over all GPUs (img/s per GPU within 15% of one GPU), two local
  workers splitting the GPUs, Horovod when its venv exists (TensorFlow).
Without GPUs the CPU subset runs and every GPU check is a SKIP with why.

Modules: check_plan.py (which checks, from the device list), commands.py
(the trainer command lines), verdicts.py (pass/fail from numbers),
gpu_util.py and threads.py (what is sampled during a run), check_procs.py
(trainer subprocesses and their timeout), tfprobe.py and jaxprobe.py
(TensorFlow's and JAX's view, in a subprocess), jax_diagnosis.py (why JAX
sees fewer GPUs), env_checks.py (the backend and gpus rows), run_checks.py
(running one check), report.py (table and JSON), cli.py (flags, console
entry) and __main__.py (python -m official_bench.doctor).
"""
