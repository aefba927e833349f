"""Errors every part of the project may raise for the ``deca`` command to print as one line (exit 2)."""

import json
from pathlib import Path


class UsageError(Exception):
    """A problem with what the user asked for; printed without a traceback."""


def read_json(path, missing, what="valid JSON", error=UsageError):
    """The JSON document in ``path``; ``error`` with the message ``missing`` when there is no such file,
    or naming the file, ``what`` it should be and the parser's complaint when it does not parse."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise error(missing) from None
    except json.JSONDecodeError as e:
        raise error(f"{path}: not {what} ({e})") from None
