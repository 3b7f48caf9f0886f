"""Training pieces: LR schedules, optimizers, losses and metrics, callbacks."""
