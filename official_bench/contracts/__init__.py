"""Formats shared by producers and consumers, in one place.

TensorFlow-free on purpose: the launcher, the extractor and the trainer all
import it, and the first two must start without loading TensorFlow.

  exit_status every command's exit statuses, in one table
  hostport    'host:port' / '[v6addr]:port' parsing and formatting
  tf_config   the TF_CONFIG reader used by the trainer and the launcher
  throughput  the TimeHistory line, the run-finished and timeout marks
  dtypes      precision names: fp32/fp16/bf16 and float32/float16/bfloat16
"""
