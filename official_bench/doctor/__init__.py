"""official-bench-doctor: checks a machine before any number is trusted.

Run on a GPU machine before benchmarking. It prints a PASS/FAIL/SKIP table
and writes it as JSON:

- tensorflow / gpus: what TensorFlow sees and, if a GPU is missing, why and
  how to fix it (official_bench/host/gpu_diagnosis.py);
- short synthetic runs on one GPU for each precision x data format x XLA,
  with the GPU's utilisation sampled while they run and the loss checked;
- mirrored over all GPUs (replicas = GPUs, img/s per GPU within 15% of one
  GPU), multi_worker_mirrored with two local workers splitting the GPUs
  (replicas, devices, thread count stable), Horovod when its venv exists.

Without GPUs the same checks run on the CPU where they make sense and every
GPU check is listed as SKIP with the reason.

Modules: check_plan.py (which checks, from the device list), commands.py
(the trainer command lines), verdicts.py (pass/fail from numbers),
gpu_util.py and threads.py (what is sampled during a run), check_procs.py
(trainer subprocesses and their timeout), tfprobe.py (TensorFlow's view, in
a subprocess), env_checks.py (the tensorflow and gpus rows), run_checks.py
(running one check), report.py (table and JSON), cli.py (flags, console
entry) and __main__.py (python -m official_bench.doctor).
"""
