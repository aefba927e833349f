"""Generator parameters of the DECA PE and the rules derived from them.

Plain Python (no Amaranth import) so that the performance model in ``deca.sim`` uses the same
numbers as the hardware: the number of dequantization lanes Lq per cycle and the cycles a vOp
spends in the dequantization stage.
"""

from deca.golden.format import Q_BITS, TILE_ELEMS

W_CHOICES = (8, 16, 32, 64)

#: Loaders of the PE, each with its TOut buffer: the paper's two by default, up to four.
LOADERS = 2
LOADER_CHOICES = (2, 3, 4)
#: The PE's storage, each a generator parameter (``deca generate``, ``deca run``, ``deca synth``:
#: ``--contexts``, ``--tags``, ``--sqq-bytes``, ``--tout-buffers``) whose default is the smallest size
#: that keeps the throughput of W = 32, L = 8: BF8 at 5% density at 17.6 cycles per tile and every
#: ``deca run`` point within 2% (``benchmarks/bench_storage.py``, recorded in docs/synthesis.md,
#: "Storage sized by measurement").
#:
#: Tile contexts per loader, each with a tag table, SQQ, mask and scale queues and a window unit
#: (the loader's ``tags`` and ``sqq_bytes`` split evenly): one drains into the pipeline while the
#: next one's lines are fetched. The paper's loader holds one (27.2 cycles per tile at 5%).
CONTEXTS = 2
CONTEXT_CHOICES = (1, 2, 3, 4)
#: Tag-table entries per loader: line reads it may have outstanding (8 per context; 4 lose 2.4%).
TAGS = 16
#: SQQ bytes per loader; None: four rows per tile context, the least a context's two banks can have (a row
#: is a line, or a value beat where that is wider): 512 for two contexts up to W = 32, 1 KB at W = 64, L >= 16
#: (``deca.hw.pe.sqq_byte_count``).
SQQ_BYTES = None
#: TOut tile buffers (1 KB each); None: one per loader (one for two loaders: 18.0 cycles per tile at 5%).
TOUT_BUFFERS = None
TOUT_BUFFER_CHOICES = (1, 2, 3, 4)
#: The storage parameters by name, with their defaults.
STORAGE = {"contexts": CONTEXTS, "tags": TAGS, "sqq_bytes": SQQ_BYTES, "tout_buffers": TOUT_BUFFERS}

#: Values per cycle per big LUT for each code width (paper, section 6.2). A big LUT is four
#: 64-entry sub-LUTs: Q = 8 needs all four for one 256-entry table, Q = 7 a pair per 128-entry
#: table, Q <= 6 lets every sub-LUT serve a lookup of its own.
#:
#: Q = 16 bypasses the LUTs and gets the Q <= 6 rate, 4L values per cycle (the least the design
#: allows): every SD lane then takes at most one value per cycle whatever Q is, so the SD register,
#: expander and bubble rule are shared by all widths. A rate of W would differ only when 4L < W,
#: would need a 16*W-bit SQQ read for those small-L designs, and would only speed up BF16, whose
#: 1 KB (dense) or 64 + 1024*d bytes per tile keep it memory-bound (``deca model``).
LANES_PER_LUT = {q: (1 if q == 8 else 2 if q == 7 else 4) for q in Q_BITS}


class ParameterError(ValueError):
    """Impossible generator parameters (W, L, storage) or runtime configuration."""


def check_params(W, L):
    """Raise ParameterError unless (W, L) is a design this generator can build."""
    if not isinstance(W, int) or W not in W_CHOICES:
        raise ParameterError(f"W must be one of {', '.join(map(str, W_CHOICES))} (elements per vOp dividing "
                             f"the {TILE_ELEMS}-element tile), got {W!r}")
    if not isinstance(L, int) or L < 1 or L & (L - 1):
        raise ParameterError(f"L must be a power of two >= 1 (number of big LUTs), got {L!r}")
    if L > W:
        raise ParameterError(f"L = {L} LUTs exceeds W = {W}: a vOp never dequantizes more than W values")


def check_loaders(loaders):
    """Raise ParameterError unless ``loaders`` is a loader count the PE can have."""
    if isinstance(loaders, bool) or loaders not in LOADER_CHOICES:
        raise ParameterError(f"loaders must be one of {', '.join(map(str, LOADER_CHOICES))} (TEPL ports, each with a "
                             f"loader and by default a TOut buffer), got {loaders!r}")


def check_contexts(contexts):
    if isinstance(contexts, bool) or contexts not in CONTEXT_CHOICES:
        raise ParameterError(f"contexts must be one of {', '.join(map(str, CONTEXT_CHOICES))} (tile contexts per "
                             f"loader), got {contexts!r}")


def tout_buffer_count(buffers, loaders):
    """TOut's tile buffers: ``buffers``, checked, or one per loader when it is None."""
    if buffers is None:
        return loaders
    if isinstance(buffers, bool) or buffers not in TOUT_BUFFER_CHOICES:
        raise ParameterError(f"tout_buffers must be one of {', '.join(map(str, TOUT_BUFFER_CHOICES))} (1 KB tile "
                             f"buffers of TOut), got {buffers!r}")
    return buffers


def loader_counts(counts):
    """``counts`` (a list of loader counts, e.g. a sweep's) each once, in order, each checked."""
    counts = list(dict.fromkeys(counts))
    for loaders in counts:
        check_loaders(loaders)
    return counts


def dequant_lanes(q, L):
    """Lq: how many Q-bit codes the dequantization stage turns into BF16 per cycle."""
    if q not in LANES_PER_LUT:
        raise ParameterError(f"Q must be one of {', '.join(map(str, Q_BITS))}, got {q!r}")
    return LANES_PER_LUT[q] * L


def vops_per_tile(W):
    return TILE_ELEMS // W


def vop_cycles(wnd, lanes):
    """Cycles a vOp with a window of ``wnd`` stored values occupies the dequantization stage.

    Works elementwise on NumPy arrays too.
    """
    return -(-wnd // lanes) + (wnd == 0)
