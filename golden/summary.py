"""Human-readable facts about compressed matrices: ``deca inspect`` and the golden round trip of ``deca run``."""

import numpy as np

from .container import load, save
from .format import SCALE_BYTES, TILE_COLS, TILE_ELEMS, TILE_ROWS
from .matrix import compress, decompress, decompress_tile, from_tiles
from .numerics import bf16_to_f32
from .schemes import SCHEMES


def paper_bits_per_weight(cm):
    """Bits per weight by the paper's formula Q*d (+1 mask bit when sparse), plus scale bits per weight."""
    cfg = cm.config
    bits = cfg.q_bits * cm.density + (1 if cfg.sparse else 0)
    scale = 8 * SCALE_BYTES[cfg.scale_format] / cm.group_size if cfg.scale_format else 0.0
    return bits, scale


def summarize(cm):
    """Facts about ``cm`` as a dict (sizes in bytes, ratios against BF16)."""
    m, k = cm.shape
    tm, tk = cm.tile_grid
    streams = cm.stream_bytes()
    total = sum(streams.values())
    bits, scale_bits = paper_bits_per_weight(cm)
    return {
        "scheme": cm.scheme,
        "shape": cm.shape,
        "tiles": (tm, tk),
        "q_bits": cm.config.q_bits,
        "sparse": cm.config.sparse,
        "scale_format": cm.config.scale_format,
        "group_size": cm.group_size,
        "scale_group": cm.config.scale_group,
        "lut_size": cm.config.lut_size,
        "density": cm.density,
        "stored": int(cm.stored_per_tile().sum()),
        "streams": streams,
        "total_bytes": total,
        "bytes_per_tile": total / cm.num_tiles,
        "bits_per_weight": 8 * total / (m * k),
        "compression": 16 * m * k / (8 * total) if total else float("inf"),
        "paper_compression": 16 / bits if bits else float("inf"),
        "paper_compression_with_scales": 16 / (bits + scale_bits) if bits + scale_bits else float("inf"),
        "tensor_scale": cm.tensor_scale,
    }


def format_summary(s, name=None):
    m, k = s["shape"]
    tm, tk = s["tiles"]
    if s["scale_format"]:
        g = "per channel" if s["group_size"] == k else f"per {s['group_size']} along K"
        scales = f"{s['scale_format']} {g} (g = {s['scale_group']} in a tile)"
    else:
        scales = "none"
    q = "raw BF16" if s["q_bits"] == 16 else f"{s['lut_size']} LUT entries"
    st = s["streams"]
    lines = [
        ("file", name),
        ("scheme", f"{s['scheme']}: {SCHEMES[s['scheme']].summary}"),
        ("shape", f"{m} x {k} ({tm} x {tk} = {tm * tk} tiles of 16 x 32)"),
        ("elements", f"Q = {s['q_bits']} bits ({q}), {'sparse (bitmask)' if s['sparse'] else 'dense'}"),
        ("scales", scales),
        ("density", f"{s['density']:.4f} ({s['stored']} of {m * k} stored)"),
        ("bytes", f"values {st['values']}, mask {st['mask']}, scales {st['scales']}, total {s['total_bytes']}"),
        ("per tile", f"{s['bytes_per_tile']:.1f} bytes on average (a BF16 tile is 1024)"),
        ("bits/weight", f"{s['bits_per_weight']:.3f}"),
        ("compression", f"{s['compression']:.2f}x vs BF16 measured; paper formula "
                        f"{'16/(Q*d+1)' if s['sparse'] else '16/Q'} = {s['paper_compression']:.2f}x, "
                        f"with scale overhead {s['paper_compression_with_scales']:.2f}x"),
    ]
    if s["scheme"] == "nvfp4":
        lines.append(("tensor scale", f"{s['tensor_scale']!r} (FP32, applied after the tile decode)"))
    return "\n".join(f"{key:<13}{val}" for key, val in lines if val is not None)


def memory_image_roundtrip(cm, base=0x1000, align=64):
    """Decode every tile from a memory image through its metadata row; returns (M, K) BF16 patterns."""
    image, meta = cm.memory_image(base=base, align=align)

    def read(addr, length):
        return image[addr - base: addr - base + length].tobytes() if length else b""

    tm, tk = cm.tile_grid
    m, k = cm.shape
    tiles = np.stack([
        decompress_tile(read(r["val_addr"], r["val_len"]), read(r["mask_addr"], r["mask_len"]),
                        read(r["scale_addr"], r["scale_len"]), cm.config)
        for r in meta
    ]).reshape(tm * tk, TILE_ELEMS)
    return from_tiles(tiles, (tm * TILE_ROWS, tk * TILE_COLS))[:m, :k]


def roundtrip(w, scheme, density, workdir, **kwargs):
    """Compress, save, load and decompress ``w``; check three decode paths agree bit for bit.

    Returns a result row: sizes, error against ``w``, and ``exact`` (whether the matrix decode,
    the per-tile decode from a memory image, and the decode of the reloaded file were identical).
    """
    cm = compress(w, scheme, density=density, **kwargs)
    out = decompress(cm)
    path = workdir / f"{scheme}-{density}.deca"
    save(cm, path)
    exact = np.array_equal(decompress(load(path)), out) and np.array_equal(memory_image_roundtrip(cm), out)
    ref = np.where(cm.stored_mask(), w, 0).astype(np.float64)
    err = bf16_to_f32(out).astype(np.float64) * cm.tensor_scale - ref
    s = summarize(cm)
    return {
        "scheme": scheme,
        "density": cm.density,
        "q_bits": cm.config.q_bits,
        "bits_per_weight": s["bits_per_weight"],
        "compression": s["compression"],
        "rel_rms_error": float(np.sqrt(np.mean(err**2) / max(np.mean(ref**2), 1e-300))),
        "exact": exact,
    }


def format_table(rows, columns):
    """Plain-text table of dict rows; ``columns`` maps key -> (header, format string or function)."""
    cells = [[fmt(r[key]) if callable(fmt) else fmt.format(r[key]) for key, (_, fmt) in columns.items()]
             for r in rows]
    heads = [h for h, _ in columns.values()]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]
    line = lambda vals: "  ".join(v.rjust(wd) for v, wd in zip(vals, widths))  # noqa: E731
    return "\n".join([line(heads), line(["-" * wd for wd in widths]), *map(line, cells)])


def markdown_table(rows, columns):
    """A Markdown table of dict rows; ``columns`` as for ``format_table``."""
    head = [h for h, _ in columns.values()]
    cells = [[fmt(r[key]) if callable(fmt) else fmt.format(r[key]) for key, (_, fmt) in columns.items()] for r in rows]
    return "\n".join("| " + " | ".join(row) + " |" for row in [head, ["---"] * len(head), *cells])


ROUNDTRIP_COLUMNS = {
    "scheme": ("scheme", "{}"),
    "density": ("density", "{:.2f}"),
    "q_bits": ("Q", "{}"),
    "bits_per_weight": ("bits/weight", "{:.3f}"),
    "compression": ("vs BF16", "{:.2f}x"),
    "rel_rms_error": ("rel. RMS err", "{:.2e}"),
    "exact": ("bit-exact", lambda ok: "yes" if ok else "NO"),
}
