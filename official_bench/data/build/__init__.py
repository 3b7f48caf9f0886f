"""The offline TFRecord builder (official-bench-build-records): image folders
to ImageNet-style shards, and the check of finished shards."""
