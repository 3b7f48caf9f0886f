"""The ImageNet RGB mean and std on a 0..255 scale.

The input pipeline normalises with them (data/preprocessing.py) and the
models' Standardize layer does the same inside the model
(models/resnet.py), whichever Keras builds it; defined once here, without
TensorFlow, so the JAX backend's model reads the same numbers.
"""

IMAGENET_MEAN_RGB = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD_RGB = (0.229 * 255, 0.224 * 255, 0.225 * 255)
