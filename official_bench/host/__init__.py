"""Machine facts and process chores, standard library only: the one
nvidia-smi runner and CUDA_VISIBLE_DEVICES reader (gpus), why TensorFlow
sees no GPU (gpu_diagnosis), GPU and process usage (probes), stopping
process groups (processes), glibc malloc's thresholds (malloc), CUDA
waits that block and streams, by ctypes (cuda_driver), atomic
writes (atomic) and the width help is wrapped at (terminal). The bottom
layer: everything may import it, it imports nothing of ours."""
