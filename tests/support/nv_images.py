"""Stand-ins for nvImageCodec's objects where the tests' CPU decoder cannot
show a GPU's behaviour."""

import threading


class OnTheGpu:
    """An nvImageCodec Image stand-in whose pixels are on the GPU: cpu()
    copies them (or fails with `fail`), noting the thread that asked."""

    def __init__(self, pixels, fail=None):
        self.shape, self.pixels, self._fail = pixels.shape, pixels, fail
        self.copied_on = []

    def cpu(self):
        self.copied_on.append(threading.get_ident())
        if self._fail is not None:
            raise self._fail
        return self.pixels
