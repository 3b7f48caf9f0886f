"""The launcher behind run_single_node.sh, run_two_node.sh, run_multi_node.sh.

    python -m official_bench.launch single [BATCH] [DTYPE] [TEST_NUM] [options]
    python -m official_bench.launch two    [BATCH] [DTYPE] [TEST_NUM] [options]
    python -m official_bench.launch multi  [BATCH] [DTYPE] [TEST_NUM] [options]

Modules, top to bottom:

- settings: every knob (command-line option or environment variable); the
  only module that reads the environment (including TF_CONFIG and SLURM_*).
- nodes: node list and this machine's task index (TASK_INDEX > Slurm >
  matching this machine's hostname and interface addresses), from
  node_list (parsing NODES, HOSTFILE, TF_CONFIG), slurm (hostlists,
  SLURM_*) and identity (this machine's addresses, DNS).
- plan: config file, runs, commands, log and model paths (named and placed
  by contracts/log_tree.py, which the extractor reads with), from
  gpu_assign (devices per case, GPUs per trainer), horovodrun
  (LAUNCHER=horovod's venv, hosts, options) and overrides (the trainer's
  --params_override); errors holds their PlanError.
- barrier: a TCP meeting point on node 0, so run i starts together on every
  node and every node learns how run i went on the others.
- auth: the barrier's shared secret (BARRIER_SECRET[_FILE], else derived
  from the Slurm job, else none: an open barrier) and its HMAC tags.
- preflight: checks, before any run, that the trainer's Python can import
  the trainer (standard library only, so it works under a bare python3).
- runner: runs the trainer under `timeout -k`, writes the log tree (every
  write through host/write_errors: a full disk stops the sweep, exit 5).
- progress: follows a run's log: progress lines, the run's img/s, the
  extractor command and window.
- claims: the O_EXCL claim file a launcher holds on each case directory it
  writes (a second launcher stops, exit 6).
- resume: planned runs already in the tree: refused, RESUME=1 or
  OVERWRITE=1 (moved aside into .replaced-{stamp}/).

WORKERS_PER_NODE=G > 1 starts G trainer processes per node (one per GPU or
CPU device), each a multi_worker_mirrored task of its own (plan.Worker).

LAUNCHER=horovod swaps the trainer command for one `horovodrun -np N*G -H
host1:G,...` started by node 0's launcher alone (no barrier; see --help).

It never imports TensorFlow: the trainer runs in a child process.
"""
