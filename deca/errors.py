"""Errors every part of the project may raise for the ``deca`` command to print as one line (exit 2)."""


class UsageError(Exception):
    """A problem with what the user asked for; printed without a traceback."""
