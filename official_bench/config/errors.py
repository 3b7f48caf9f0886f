"""The one exception of config loading and checking."""


class ConfigError(ValueError):
    """A bad configuration; the message names the key and its source."""
