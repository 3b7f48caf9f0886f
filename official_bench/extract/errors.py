"""The one exception type of the results package.

Library code raises :class:`ExtractError` for bad input (missing directory, no
logs, unreadable result file, missing matplotlib when a plot was demanded);
only the CLI entry points turn it into a message and an exit status, so the
functions stay usable from notebooks and tests. :class:`MixedBackends` is
the one that is bad usage (exit 2): the input is fine, the folder given is
not one measurement.
"""


class ExtractError(Exception):
    """Bad input for the extractor; the message names the path and the fix."""


class MixedBackends(ExtractError):
    """One --log_dir holds runs of several backends, which would be averaged
    into a number nobody ran; the message names which runs are which."""
