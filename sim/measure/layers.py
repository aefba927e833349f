"""``deca run --model``: the layers of a compressed checkpoint (``deca compress MODEL -o FOLDER``)
measured on the RTL, a random sample of tiles per layer, beside the random-mask bubble model.

Each selected layer contributes a sample of its tiles (drawn with the run's seed, kept in tile
order) as a matrix of one tile row, written to ``OUT/samples/`` and measured like a user's
``--matrix`` in both invocation modes. Per layer the report gives cycles per tile, the measured
bpv, the bpv of the sample's actual masks, the binomial bpv at the layer's density (section 6.2's
random-mask model) and the Roof-Surface prediction; the model-wide numbers weight each layer by
its number of tiles. Where the actual masks' bpv is off the binomial by more than
``bpv_tolerance`` the report names the layer: magnitude pruning of real weights does not put the
stored elements at independent random places.
"""

import csv
import re
from pathlib import Path

import numpy as np

from deca.errors import UsageError
from deca.golden import CompressedMatrix, load, save
from deca.golden.checkpoint import layer_paths, layer_rows
from deca.golden.format import TILE_COLS, TILE_ROWS
from deca.golden.summary import format_table

from deca.sim.model.bubbles import bpv_expected

from .point import Point
from .records import bpv_tolerance


def sample_tiles(cm, tiles):
    """The tiles ``tiles`` (indices, increasing) of ``cm`` as a matrix of one tile row; tiles that
    share a scale block keep sharing it."""
    tiles = np.asarray(tiles, np.int64)
    lengths = np.diff(cm.value_offsets)[tiles]
    values = np.concatenate([cm.values[cm.value_offsets[t]:cm.value_offsets[t + 1]] for t in tiles])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    blocks = block_of_tile = None
    if cm.scale_blocks is not None:
        used, block_of_tile = np.unique(cm.scale_block_of_tile[tiles], return_inverse=True)
        blocks = cm.scale_blocks[used]
    return CompressedMatrix((TILE_ROWS, TILE_COLS * len(tiles)), cm.scheme, cm.config, values, offsets,
                            None if cm.masks is None else cm.masks[tiles], blocks, block_of_tile,
                            cm.group_size, cm.tensor_scale)


def layer_samples(model, pattern, tiles_per_layer, seed, folder):
    """[(layer statistics row, sample .deca path, tiles in the layer)] of the finished layers whose
    names match ``pattern``."""
    _, rows, _ = layer_rows(model)
    try:
        selected = [r for r in rows if re.search(pattern or "", r["name"])]
    except re.error as e:
        raise UsageError(f"--layers: not a regular expression: {e}") from None
    if not selected:
        raise UsageError(f"no finished layer of {model} matches --layers {pattern!r}")
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    samples = []
    for row in selected:
        cm = load(layer_paths(model, row["name"])[0])
        n = min(tiles_per_layer, cm.num_tiles)
        path = folder / f"{row['name']}.deca"
        save(sample_tiles(cm, np.sort(rng.choice(cm.num_tiles, n, replace=False))), path)
        samples.append((row, path, cm.num_tiles))
    return samples


def points(samples, W, L, modes, loaders):
    return [Point(W, L, str(path.resolve()), mode, loaders) for _, path, _ in samples for mode in modes]


LAYER_COLUMNS = {
    "name": ("layer", "{}"), "density": ("density", "{:.3f}"), "tiles": ("tiles", "{}"),
    "tepl": ("TEPL cycles/tile", "{:.1f}"), "store": ("store-and-fence", "{:.1f}"),
    "model": ("model", "{:.1f}"), "bpv": ("bpv", "{:.3f}"), "bpv_masks": ("bpv masks", "{:.3f}"),
    "bpv_random": ("bpv random", "{:.3f}"), "deviation": ("masks - random", "{:+.3f}"),
    "ratio": ("masks / random", "{:.2f}x"),
}


def layer_table(samples, records, W, L):
    """Per-layer rows (and the model-wide row, weighted by the layers' tiles) from the records."""
    by_file = {}
    for r in records:
        by_file.setdefault(Path(r["workload"]).resolve(), {})[r["mode"]] = r
    rows = []
    for stats, path, layer_tiles in samples:
        recs = by_file[path.resolve()]
        any_rec = next(iter(recs.values()))
        cm = load(path)
        random = bpv_expected(W, L, cm.config.q_bits, cm.config.sparse, stats["density"])
        rows.append({
            "name": stats["name"], "density": stats["density"], "tiles": f"{any_rec['tiles']}/{layer_tiles}",
            "weight": layer_tiles,
            "tepl": recs["tepl"]["cycles_per_tile"] if "tepl" in recs else float("nan"),
            "store": recs["store"]["cycles_per_tile"] if "store" in recs else float("nan"),
            "model": any_rec["predicted_cycles_per_tile"], "bpv": any_rec["bpv_measured"],
            "bpv_masks": any_rec["bpv_masks"], "bpv_random": random, "deviation": any_rec["bpv_masks"] - random,
            "ratio": _ratio(any_rec["bpv_masks"], random),
        })
    weights = np.array([r["weight"] for r in rows], float)
    total = {"name": f"model ({len(rows)} layers)", "tiles": f"{int(weights.sum())} in all",
             "density": float(np.average([r["density"] for r in rows], weights=weights))}
    for key in ("tepl", "store", "model", "bpv", "bpv_masks", "bpv_random", "deviation"):
        total[key] = float(np.average([r[key] for r in rows], weights=weights))
    total["ratio"] = _ratio(total["bpv_masks"], total["bpv_random"])
    return rows, total


def _ratio(masks, random):
    """bpv of the actual masks over the random-mask bpv (1 when both are 0, as for dense layers)."""
    return masks / random if random else (1.0 if masks == 0 else float("inf"))


def deviations(rows):
    """The layers whose actual masks' bpv is off the random-mask model by more than the tolerance."""
    return [r for r in rows if abs(r["deviation"]) > bpv_tolerance(r["bpv_random"])]


def report(samples, records, W, L, out):
    """Print the per-layer table and the deviations; write ``layers.csv`` and ``layers.md``."""
    rows, total = layer_table(samples, records, W, L)
    table = format_table(rows + [total], LAYER_COLUMNS)
    off = deviations(rows)
    lines = [f"\nLayers on the PE W={W} L={L} (cycles per tile of the sampled tiles; model-wide row weighted "
             "by each layer's tiles)", table]
    if off:
        worst = max(off, key=lambda r: abs(r["deviation"]))
        lines.append(f"real masks deviate from the random-mask model in {len(off)} of {len(rows)} layers "
                     f"(beyond max(3%, 0.02) bpv); largest: {worst['name']}, {worst['bpv_masks']:.3f} against "
                     f"{worst['bpv_random']:.3f} ({worst['deviation']:+.3f} bpv, "
                     f"{worst['deviation'] / max(worst['bpv_random'], 1e-12):+.0%})")
    else:
        lines.append(f"real masks follow the random-mask model within max(3%, 0.02) bpv in all {len(rows)} layers")
    lines.append(f"model-wide: {total['bpv_masks']:.3f} bpv of the actual masks against {total['bpv_random']:.3f} "
                 f"random ({total['deviation']:+.3f} bpv, {total['ratio']:.2f}x); layers {min(r['ratio'] for r in rows):.2f}x "
                 f"to {max(r['ratio'] for r in rows):.2f}x")
    text = "\n".join(lines)
    print(text)
    with open(out / "layers.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(LAYER_COLUMNS))
        writer.writeheader()
        for r in rows + [total]:
            writer.writerow({k: r[k] for k in LAYER_COLUMNS})
    (out / "layers.md").write_text("```\n" + text.strip() + "\n```\n")
    return rows, total
