"""The functional coverage of ``deca verify``: every bin declared once here, for a design's loader count.

A block of the regression (``deca.sim.verify.regression``) counts hits per bin name; ``report``
says how many of the declared bins were hit and which were not. Bins:

- ``tile/<scheme>/<density bucket>/<group>``: a tile delivered bit-exact, by scheme, density
  bucket of its mask (``DENSITY_BUCKETS``) and scale group size (the groups the scheme allows);
- ``bits/<Q>``: a tile of every code width (the codebook scheme gives Q = 1..8);
- ``edge/<what>``: an empty value stream, one stored element per row, a full mask in sparse
  mode, a value stream ending exactly on a 64-byte line boundary;
- ``squash/<phase>/<in flight>``: a squash by what it hits (``deca.sim.bench.engine.SQUASH_PHASES``)
  and how many TEPLs it aborts (one, up to the loader count, more);
- ``error/<reason>/port<p>``: an error completion of every class on every TEPL port;
- ``memory/reorder_<depth>``, ``memory/out_of_order``: how many responses were due when one was
  chosen, and a response overtaking an older one;
- ``event/<name>``: TEPLs waiting with every loader busy, line reads held by memory back-pressure,
  completion beats held by the core (TOut full), prefetched lines read after they arrived (hit),
  before (late), never (wasted);
- ``mode/<mode>``: TEPL and store-fence cores.
"""

from deca.golden import SCHEMES
from deca.hw.layouts import ErrorReason
from deca.sim.bench.cores import MODES
from deca.sim.bench.engine import SQUASH_PHASES

#: The density buckets of a sparse tile, each with its (fewest, most) stored elements of 512: none,
#: up to 10%, 30%, 60%, below full, a full mask.
STORED = {"empty": (0, 0), "le10": (1, 51), "le30": (52, 153), "le60": (154, 307), "lt100": (308, 511),
          "full": (512, 512)}
#: Density buckets of a tile: the sparse format's and the dense format.
DENSITY_BUCKETS = (*STORED, "dense")
#: Scale group sizes a scheme may be compressed with (``golden.schemes``): none, the fixed one, or these.
GROUPS = (16, 32, 64, 128, "channel")
CODE_BITS = (1, 2, 3, 4, 5, 6, 7, 8, 16)
EDGES = ("empty_values", "one_per_row", "full_mask", "values_end_on_line")
ERRORS = tuple(r.name for r in ErrorReason if r is not ErrorReason.NONE)
EVENTS = ("loaders_full", "mem_req_stall", "tout_full", "prefetch_hit", "prefetch_late", "prefetch_wasted")


def groups_of(scheme):
    """The scale group sizes of ``scheme`` the regression draws (None: unscaled)."""
    s = SCHEMES[scheme]
    if s.scaling == "never":
        return (None,)
    if s.fixed_group is not None:
        return (s.fixed_group,)
    return ((None,) if s.scaling == "optional" else ()) + GROUPS


def density_buckets(scheme):
    return DENSITY_BUCKETS[:-1] if SCHEMES[scheme].always_sparse else DENSITY_BUCKETS


def density_bucket(stored, dense):
    """The bucket of a tile with ``stored`` elements of 512 (``dense``: the dense format)."""
    return "dense" if dense else next(bucket for bucket, (_, most) in STORED.items() if stored <= most)


def tile_crosses():
    """Every (scheme, density bucket, group) of a tile bin, in report order."""
    return [(s, d, g) for s in SCHEMES for d in density_buckets(s) for g in groups_of(s)]


def in_flight_bucket(n, loaders):
    return "one" if n == 1 else "upto_loaders" if n <= loaders else "more"


def declared(loaders):
    """Every bin name for a PE with ``loaders`` TEPL ports, in report order."""
    bins = [f"tile/{s}/{d}/{g}" for s, d, g in tile_crosses()]
    bins += [f"bits/{q}" for q in CODE_BITS] + [f"edge/{e}" for e in EDGES]
    flights = ["one", *(["upto_loaders"] if loaders > 1 else []), "more"]
    bins += ["squash/idle/0", "squash/presented/0"]
    bins += [f"squash/{phase}/{n}" for phase in SQUASH_PHASES[2:] for n in flights]
    bins += [f"error/{e}/port{p}" for e in ERRORS for p in range(loaders)]
    bins += [f"memory/reorder_{d}" for d in ("1", "2-3", "4-7", "8+")] + ["memory/out_of_order"]
    bins += [f"event/{e}" for e in EVENTS] + [f"mode/{m}" for m in MODES]
    return bins


def engine_hits(events, loaders):
    """Bin hits from the fast engine's event counts (``deca.sim.bench.engine.EVENTS``)."""
    hits = {f"event/{e}": events[e] for e in EVENTS}
    for depth in ("1", "2-3", "4-7", "8+"):
        hits[f"memory/reorder_{depth}"] = events[f"reorder_depth_{depth}"]
    hits["memory/out_of_order"] = events["out_of_order"]
    for reason in ErrorReason:
        for port in range(loaders):
            if reason is not ErrorReason.NONE:
                hits[f"error/{reason.name}/port{port}"] = events[f"error_{reason.value}_port_{port}"]
    for phase in SQUASH_PHASES:
        for n in range(9):
            count = events[f"squash_{phase}_inflight_{n}"]
            if count:
                name = f"squash/{phase}/{0 if n == 0 else in_flight_bucket(n, loaders)}"
                hits[name] = hits.get(name, 0) + count
    return {name: count for name, count in hits.items() if count}


def report(hits, loaders):
    """(bins hit, bins declared, [bins never hit], percent)."""
    bins = declared(loaders)
    missed = [b for b in bins if not hits.get(b)]
    hit = len(bins) - len(missed)
    return hit, len(bins), missed, 100 * hit / len(bins)
