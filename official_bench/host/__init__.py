"""Machine facts and process chores without TensorFlow or project imports:
GPUs as nvidia-smi and the driver see them, process usage, malloc, atomic
writes. The bottom layer: everything may import it, it imports nothing of
ours."""
