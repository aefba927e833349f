"""Measurement records: the fields of one, reading and writing them, and the per-design summary
other tools take from a campaign (``deca synth --measured``)."""

import json
import math
import os
import statistics
from pathlib import Path

from deca.hw.params import LOADERS
from deca.sim.model.paper import DSE_BEST

#: A record's fields, in CSV column order.
COLUMNS = (
    "key", "W", "L", "loaders", "workload", "scheme", "density", "mode", "tiles", "seed", "cycles", "cycles_per_tile",
    "vops", "bubbles", "bpv_measured", "bpv_analytic", "bpv_masks", "starve_cycles", "backpressure_cycles",
    "busy_cycles", "squashes", "bytes_per_tile", "lines_per_tile", "lines_fetched", "lines_demanded",
    "lines_prefetched", "prefetch_wasted_bytes",
    "util_mem", "util_tmul", "util_deca", "tflops", "predicted_cycles_per_tile", "predicted_tflops",
    "predicted_bound",
)


def bpv_tolerance(analytic):
    """How far a measured bpv may be from the closed form: 3% of it or 0.02, whichever is larger."""
    return max(0.03 * analytic, 0.02)



def first_difference(records, others, names=("the first", "the second")):
    """None if the two lists of records are equal, else a line naming the first record and field that
    differ (how the engines' cross-check reports a mismatch)."""
    for index, (a, b) in enumerate(zip(records, others)):
        for field in [*a, *(f for f in b if f not in a)]:
            if a.get(field) != b.get(field):
                return (f"record {index} ({a.get('key')}): {field} is {a.get(field)!r} in {names[0]}, "
                        f"{b.get(field)!r} in {names[1]}")
    if len(records) != len(others):
        return f"{len(records)} records in {names[0]}, {len(others)} in {names[1]}"
    return None


def write_record(folder, rec):
    """Write a record as ``<folder>/<key>.json``, atomically: an interrupted run leaves no half file."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{rec['key']}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(rec, indent=1))
    tmp.replace(folder / f"{rec['key']}.json")


def read_records(folder):
    """Every record in ``folder``, by key."""
    out = {}
    for path in sorted(Path(folder).glob("*.json")):
        rec = json.loads(path.read_text())
        out[rec["key"]] = rec
    return out


def design_of(record):
    """A record's design: (W, L, loaders)."""
    return record["W"], record["L"], record["loaders"]


def design_rows(records):
    """Per design (W, L, loaders), the geometric mean of cycles per tile over the TEPL workloads every
    design ran, and the speedups the paper's section 8.2 quotes where its designs were measured
    (against its best design with its two loaders)."""
    tepl = [r for r in records if r["mode"] == "tepl"]
    designs = sorted({design_of(r) for r in tepl})
    common = set.intersection(*({r["workload"] for r in tepl if design_of(r) == d} for d in designs))

    def gmean(design, field):
        return math.exp(statistics.fmean(math.log(r[field]) for r in tepl
                                         if design_of(r) == design and r["workload"] in common))

    cycles = {d: gmean(d, "cycles_per_tile") for d in designs}
    best = cycles.get((*DSE_BEST, LOADERS))
    return [{"W": W, "L": L, "loaders": n, "workloads": len(common), "gmean": g,
             "gmean_tflops": gmean((W, L, n), "tflops"), "vs_best": best / g if best else math.nan}
            for (W, L, n), g in cycles.items()]
