"""The one error type users see as a line (no traceback): bad input, a bad option, an output that cannot be made."""


class InputError(Exception):
    """A problem with an input file or a request, reported to the user as one line naming the file."""
