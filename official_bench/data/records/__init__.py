"""ImageNet-style TFRecord files (and prepared TFDS directories) read into a
tf.data pipeline: file lists, the reader, the guarded decode, bad records,
and the framing check of whole files (framing.py, file_check.py)."""
