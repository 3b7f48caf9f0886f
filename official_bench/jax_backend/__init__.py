"""The JAX backend (runtime.backend: jax): Keras 3 on JAX, TensorFlow-free.

The steps of a run, top to bottom, are trainer.py's; the pieces it puts
together live here: `keras3` (the one import of Keras 3, with the platform
and device count set first), `devices` (which devices, jax.distributed
across nodes, the DataParallel mesh), `precision` (Keras 3 dtype policies),
`synthetic` (batches made once on the devices or fed from the host),
`schedules` (the learning-rate schedules on keras.ops), `step` (the
per-replica train and eval steps under shard_map), `loss_scale` (fp16's
update without a conditional), `environment` (what a result was measured
on).
"""
