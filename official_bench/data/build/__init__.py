"""The offline TFRecord builder (official-bench-build-records): image folders
to ImageNet-style shards, and the check of finished shards.

    build_records.py  the CLI (argparse, signals, --verify), the console script
    builder.py        BuildOptions and `build`: the inputs, splits, workers
    sources.py        listing the source images, labels, boxes, class text
    example_proto.py  tf.train.Example encoded by hand (classic_example)
    image_codec.py    any image to an RGB JPEG (Pillow, else TensorFlow)
    shards.py         the image -> shard assignment, converting and writing
    progress.py       the progress bar / lines
    shard_skips.py    each finished shard's record of what it skipped
    manifest.py       build_records.json, labels.txt, skipped_images.txt
    record_verify.py  checking every record of finished shards (--verify)
    worker_pool.py    worker processes that die with the builder
"""
