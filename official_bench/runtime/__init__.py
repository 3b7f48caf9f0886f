"""Runtime set-up: Keras flavour, cluster, devices, strategy, precision."""
