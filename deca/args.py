"""argparse types shared by the subcommands' parsers (no heavy imports: every parser is built for ``deca --help``)."""

import argparse


def group_size_arg(text):
    if text == "channel":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"group size must be an integer or 'channel', got {text!r}") from None


def number_list(kind):
    """argparse type for comma-separated numbers of ``kind`` (int or float)."""
    def parse(text):
        try:
            return [kind(v) for v in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind.__name__}s, got {text!r}") from None
    return parse
