"""The launcher behind run_single_node.sh, run_two_node.sh, run_multi_node.sh.

    python -m official_bench.launch {single|two|multi} [BATCH] [DTYPE] [TEST_NUM] [options]

It plans a sweep of trainer runs, meets the other nodes before and after
each run, runs the trainer in a child process and writes the log tree that
the extractor reads. It never imports TensorFlow. Modules, top to bottom:

- settings: every knob (option or environment variable); the only module
  that reads the environment (TF_CONFIG and SLURM_* included).
- nodes: the node list and this machine's task index, from node_list
  (NODES, HOSTFILE, TF_CONFIG), slurm and identity (this machine's addresses).
- plan: config file, runs, commands, log and model paths (contracts/
  log_tree.py), from gpu_assign, horovodrun and overrides; errors: PlanError.
- barrier and auth: node 0's TCP meeting point, so run i starts together on
  every node and each node learns how it went on the others; its secret.
- preflight: can the trainer's Python import the trainer (standard library).
- runner: the sweep (every run in order, met with the other nodes), which
  executes each run with one_run, starts and stops the trainer processes
  under `timeout -k` with trainer_process, judges how a run went with
  outcome (every outcome rule) and prints with sweep_report.
- progress: a run's progress lines, img/s, the extractor command and window.
- claims and resume: one launcher per case directory (exit 6); runs already
  in the tree (refused, RESUME=1 or OVERWRITE=1).
WORKERS_PER_NODE, LAUNCHER=horovod and BACKEND=jax: docs/run_scripts.md.
"""  # noqa: E501
