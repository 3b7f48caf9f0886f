"""The launcher behind run_single_node.sh, run_two_node.sh, run_multi_node.sh.

    python -m official_bench.launch {single|two|multi} [BATCH] [DTYPE] [TEST_NUM] [options]

It plans a sweep of trainer runs, meets the other nodes before and after
each run, runs the trainer in a child process and writes the log tree that
the extractor reads. It never imports TensorFlow. Modules, top to bottom:
- __main__: the command line; launcher_python: its own Python lacks PyYAML.
- settings: every knob (option or environment variable); the only module
  that reads the environment (TF_CONFIG and SLURM_* included).
- nodes: the node list and this machine's task index, from node_list
  (NODES, HOSTFILE, TF_CONFIG), slurm and identity (this machine's addresses).
- plan: config file, backend (backend_choice), runs, commands, log and model
  paths (contracts/log_tree.py), from gpu_assign, horovodrun and overrides;
  errors: PlanError; plan_report prints it (and the dry run).
- sweep_start: the start-up (checks, claims, "hello", old runs), then runner:
  the sweep (every run in order, met with the other nodes through node_link,
  barrier and auth), which executes each run with one_run, starts and stops
  the trainers under `timeout -k` with trainer_process, judges with outcome
  (every outcome rule) and prints with sweep_report.
- preflight: can the trainer's Python import the trainer; progress: a run's
  progress lines, img/s, the extractor command and window.
- claims, resume: one launcher per case directory (exit LOGS_IN_USE); runs
  already in the tree (refused, RESUME=1 or OVERWRITE=1).
WORKERS_PER_NODE, LAUNCHER=horovod and BACKEND=jax: docs/run_scripts.md.
"""  # noqa: E501
