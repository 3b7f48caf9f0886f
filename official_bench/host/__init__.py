"""Machine facts and process chores, standard library only: the one
nvidia-smi runner and CUDA_VISIBLE_DEVICES reader (gpus), why TensorFlow
sees no GPU (gpu_diagnosis), GPU and process usage (probes), stopping
process groups (processes), glibc malloc's thresholds (malloc) and atomic
writes (atomic). The bottom layer: everything may import it, it imports
nothing of ours."""
