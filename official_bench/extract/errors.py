"""The one exception type of the results package.

Library code raises :class:`ExtractError` for bad input (missing directory, no
logs, unreadable result file, missing matplotlib when a plot was demanded);
only the CLI entry points turn it into a message and an exit status, so the
functions stay usable from notebooks and tests.
"""


class ExtractError(Exception):
    """Bad input for the extractor; the message names the path and the fix."""
