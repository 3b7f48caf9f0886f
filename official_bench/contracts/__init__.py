"""Formats shared by producers and consumers, in one place.

TensorFlow-free on purpose: the launcher, the extractor and the trainer all
import it, and the first two must start without loading TensorFlow.

  exit_status.py  every command's exit statuses, in one table
  hostport.py     'host:port' / '[v6addr]:port' parsing and formatting
  tf_config.py    the TF_CONFIG reader used by the trainer and the launcher
  throughput.py   the TimeHistory line, the run-finished and timeout marks
  counting.py     which TimeHistory intervals count (windows, warm-up)
  trainer_command.py  the trainer's module and the argv that starts it
  dtypes.py       precision names: fp32/fp16/bf16, float32/float16/bfloat16
  log_tree.py     every name of the log tree and model_dirs, built and parsed
  result_json.py  result.json: written by the trainer, read by the extractor
  run_status.py   the launcher's status record beside each run's log
  utilisation.py  result.json's utilisation field, its summary-line part
  flops.py        training FLOPs and MFU, one definition
  history_db.py   the run history: one SQLite file, one row per run
  history_row.py  a run-history row from a result.json's content
  run_backend.py  which backend a run trained on (record, tree, default)
"""
