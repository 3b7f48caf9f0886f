"""Batches fed from outside tf.data's own readers: user Python code, ZMQ
producers and tf.data service workers."""
