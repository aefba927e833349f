"""Which block of the paper's area split each generated module belongs to."""

from fnmatch import fnmatchcase

OTHER = "other"

#: (block, module-name globs), first match wins: a module belongs to the first block one of whose
#: globs matches a component of its path below the top (``pipeline.dequant.luts`` is the LUT array;
#: ``loader0.window`` is popcount/prefix sum, not a loader). Unmatched modules, the top module's own
#: glue and the unpacker included, are OTHER.
BLOCKS = (
    ("LUT array", ("luts",)),
    ("popcount/prefix sum", ("window", "popcount")),
    ("crossbar expander", ("expander",)),
    ("scaler", ("scaler",)),
    ("TOut", ("tout",)),
    ("loaders and queues", ("loader*", "prefetcher")),
)
BLOCK_NAMES = tuple(name for name, _ in BLOCKS) + (OTHER,)

#: The paper's area split of the W=32, L=8 PE (section 7.4): LDUs, SQOs, bitmask and scale queues
#: and TOut registers 55%, the LUT array 22%, the rest 23%.
PAPER_POINT = (32, 8)
PAPER_SPLIT = {"loaders, queues, TOut": 0.55, "LUT array": 0.22, "rest": 0.23}
#: The paper's totals (sections 7.1 and 7.4): 56 PEs at 2.5 GHz take about 2.51 mm² and 3.1 W
#: (dynamic power at maximum activity plus static), queues and registers about 50% of the power,
#: the LUTs 21%, the rest 29%.
PAPER_PES = 56
PAPER_AREA_MM2 = 2.51
PAPER_GHZ = 2.5
PAPER_POWER_W = 3.1
PAPER_POWER_SPLIT = {"loaders, queues, TOut": 0.50, "LUT array": 0.21, "rest": 0.29}
PAPER_GROUP = {"loaders and queues": "loaders, queues, TOut", "TOut": "loaders, queues, TOut",
               "LUT array": "LUT array"}


def block_of(module, top):
    """The block of the module named ``module`` (Amaranth's ``top.sub.subsub`` naming)."""
    path = module.removeprefix(top + ".").split(".") if module != top else []
    for name, globs in BLOCKS:
        if any(fnmatchcase(part, glob) for part in path for glob in globs):
            return name
    return OTHER


def paper_group(block):
    """The group of the paper's three-way split that ``block`` counts towards."""
    return PAPER_GROUP.get(block, "rest")
