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


def add_storage_arguments(parser):
    """The PE's storage parameters (``deca.hw.params``) as options; ``storage(args)`` collects them."""
    from deca.hw.params import CONTEXTS, SQQ_BYTES, TAGS

    g = parser.add_argument_group("storage of the PE (defaults: the sizing study's, docs/synthesis.md)")
    g.add_argument("--contexts", type=int, default=CONTEXTS,
                   help=f"tile contexts per loader, each with its share of the tags and SQQ (default {CONTEXTS})")
    g.add_argument("--tags", type=int, default=TAGS,
                   help=f"tag-table entries per loader: line reads outstanding (default {TAGS})")
    g.add_argument("--sqq-bytes", type=int, default=SQQ_BYTES,
                   help="SQQ bytes per loader (default: four rows per tile context, 512 for two up to W = 32)")
    g.add_argument("--tout-buffers", type=int, help="TOut's 1 KB tile buffers (default one per loader)")


def storage(args):
    """The storage options of ``args`` (``add_storage_arguments``) as the generator's keyword arguments."""
    return {"contexts": args.contexts, "tags": args.tags, "sqq_bytes": args.sqq_bytes,
            "tout_buffers": args.tout_buffers}
