"""Whole checkpoints: compress every selected weight matrix, report per layer, decompress back.

The output is a folder::

    OUT/manifest.json            format, settings, the source's fingerprint, every tensor of the
                                 source in order, which ones are compressed and which are left
                                 out (and why)
    OUT/layers/NAME.deca         one compressed matrix per layer (the .deca container)
    OUT/layers/NAME.json         its statistics against the original weights
    OUT/uncompressed.safetensors the tensors left out, unchanged, so that the folder holds the
                                 whole model

A layer counts as done once its .json exists; both files are written under a temporary name and
renamed, so an interrupted run (Ctrl-C, a killed worker) leaves only finished layers and the same
command resumes it. A folder that holds another checkpoint's or other settings' results is refused.
"""

import json
import os
import re
import shutil
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from .container import load, save
from .matrix import compress, decompress
from .numerics import bf16_to_f32, f32_to_bf16
from .summary import format_table, summarize
from .weights import CheckpointError, open_checkpoint, write_safetensors

FORMAT, VERSION = "deca-checkpoint", 1
MANIFEST = "manifest.json"
UNCOMPRESSED = "uncompressed.safetensors"
#: Tensors left out by default although 2-D: token and position embeddings.
EMBEDDING = re.compile(r"embed|(^|\.)(wte|wpe)(\.|$)", re.IGNORECASE)
#: Rows per block when comparing a layer with its original (bounds the float64 temporaries).
_STAT_ROWS = 1024


def select(ckpt, include=None, exclude=None):
    """(names to compress, {name: reason} of those left out), in checkpoint order.

    Candidates are 2-D floating-point tensors. Without ``include`` the embeddings are left out;
    with it, the candidates whose names it matches (re.search) are taken. A tensor that
    ``include`` matches in full but is not a candidate is an error: it was asked for by name.
    ``exclude`` removes what it matches.
    """
    chosen, left_out = [], {}
    for name, info in ckpt.tensors.items():
        candidate = len(info.shape) == 2 and info.floating
        if include and re.fullmatch(include, name) and not candidate:
            what = f"{len(info.shape)}-D" if len(info.shape) != 2 else f"of dtype {info.dtype}, not floating point"
            raise CheckpointError(f"tensor {name!r} is {what}: only 2-D floating-point weight matrices can be compressed")
        if len(info.shape) != 2:
            reason = f"{len(info.shape)}-D (bias, norm or buffer)"
        elif not info.floating:
            reason = f"not floating point ({info.dtype})"
        elif include and not re.search(include, name):
            reason = "not matched by --include"
        elif not include and EMBEDDING.search(name):
            reason = "embedding"
        elif exclude and re.search(exclude, name):
            reason = "matched by --exclude"
        else:
            chosen.append(name)
            continue
        left_out[name] = reason
    if not chosen:
        raise CheckpointError(f"{ckpt.path}: no tensor selected for compression")
    return chosen, left_out


def layer_file(name):
    """File stem of a layer: its name where that is a safe file name, else a sanitized name plus a hash."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    if safe == name and not name.startswith("."):
        return name
    return f"{safe.lstrip('.')}-{zlib.crc32(name.encode()):08x}"


def layer_paths(out, name):
    """(.deca file, statistics .json) of a layer in the output folder."""
    stem = Path(out) / "layers" / layer_file(name)
    return stem.with_name(stem.name + ".deca"), stem.with_name(stem.name + ".json")


def _write_atomically(path, write):
    tmp = path.with_name(path.name + f".partial-{os.getpid()}")
    write(tmp)
    os.replace(tmp, path)


def layer_statistics(w, cm):
    """Statistics of a compressed layer against its original float weights ``w``."""
    s = summarize(cm)
    bits = decompress(cm)
    sq_err = sq_ref = 0.0
    max_err = 0.0
    for r in range(0, w.shape[0], _STAT_ROWS):
        ref = np.asarray(w[r:r + _STAT_ROWS], np.float64)
        err = bf16_to_f32(bits[r:r + _STAT_ROWS]).astype(np.float64) * cm.tensor_scale - ref
        sq_err += float(np.sum(err * err))
        sq_ref += float(np.sum(ref * ref))
        max_err = max(max_err, float(np.max(np.abs(err))))
    return {
        "shape": list(cm.shape), "scheme": cm.scheme, "density": s["density"], "total_bytes": s["total_bytes"],
        "bits_per_weight": s["bits_per_weight"], "compression": s["compression"],
        "sum_sq_error": sq_err, "sum_sq_weights": sq_ref, "max_abs_error": max_err,
        "rel_rms_error": float(np.sqrt(sq_err / sq_ref)) if sq_ref > 0 else (0.0 if sq_err == 0 else float("inf")),
    }


#: Checkpoints a worker process has opened (its headers parsed), reused for its next layers.
_OPEN = {}


def compress_layer(source, name, out, settings):
    """Compress one tensor of ``source`` into ``out``/layers (a worker's job); returns its statistics."""
    if source not in _OPEN:
        _OPEN[source] = open_checkpoint(source)
    w = np.asarray(_OPEN[source].read(name), np.float32)
    try:
        cm = compress(w, settings["scheme"], density=settings["density"], group_size=settings["group_size"],
                      codebook=settings["codebook"])
    except ValueError as e:
        raise CheckpointError(f"tensor {name!r}: {e}") from None
    deca_path, stats_path = layer_paths(out, name)
    _write_atomically(deca_path, lambda p: save(cm, p))
    stats = {"name": name, **layer_statistics(w, cm)}
    _write_atomically(stats_path, lambda p: p.write_text(json.dumps(stats)))
    return stats


class _Progress:
    """A progress line on stderr: rewritten in place on a terminal, one line per layer otherwise."""

    def __init__(self, total, done, weights_total):
        self.total, self.done, self.t0 = total, done, time.perf_counter()
        self.weights, self.weights_total = 0, weights_total
        self.tty = sys.stderr.isatty()

    def update(self, name, weights):
        self.done += 1
        self.weights += weights
        rate = self.weights / max(time.perf_counter() - self.t0, 1e-9) / 1e6
        line = f"[{self.done}/{self.total}] {100 * self.done // self.total:3d}%  {rate:.1f} M weights/s  {name}"
        if self.tty:
            print("\r\033[K" + line, end="" if self.done < self.total else "\n", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)


def compress_checkpoint(model, out, scheme, density=None, group_size=None, codebook=None, include=None,
                        exclude=None, jobs=1):
    """Compress the selected tensors of ``model`` into the folder ``out`` (see the module text).

    Layers already done in ``out`` with the same source and settings are kept. Returns the
    manifest.
    """
    ckpt = open_checkpoint(model)
    chosen, left_out = select(ckpt, include, exclude)
    settings = {"scheme": scheme, "density": density, "group_size": group_size,
                "codebook": None if codebook is None else [float(v) for v in codebook]}
    out = Path(out)
    manifest = {
        "format": FORMAT, "version": VERSION, "source": str(Path(model).resolve()),
        "fingerprint": ckpt.fingerprint(), "settings": settings,
        "tensors": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in ckpt.tensors.values()],
        "compressed": chosen, "left_out": left_out,
    }
    _check_output_folder(out, manifest)
    (out / "layers").mkdir(parents=True, exist_ok=True)
    for stale in (out / "layers").glob("*.partial-*"):
        stale.unlink()
    _write_atomically(out / MANIFEST, lambda p: p.write_text(json.dumps(manifest, indent=1)))

    todo = [n for n in chosen if not layer_paths(out, n)[1].exists()]
    sizes = {n: int(np.prod(ckpt.tensors[n].shape)) for n in chosen}
    progress = _Progress(len(chosen), len(chosen) - len(todo), sum(sizes[n] for n in todo))
    # Workers read a zip's compressed members from one unpacked copy, not each from the start.
    source = ckpt.unpacked(out / ".unpacked")
    try:
        if jobs <= 1:
            for name in todo:
                compress_layer(str(source), name, str(out), settings)
                progress.update(name, sizes[name])
        elif todo:
            with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
                futures = {pool.submit(compress_layer, str(source), n, str(out), settings): n for n in todo}
                try:
                    for future in as_completed(futures):
                        future.result()
                        progress.update(futures[future], sizes[futures[future]])
                except BaseException:
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise
        # Tensors without a safetensors dtype (complex, object arrays of a .npz) cannot be kept.
        src = open_checkpoint(source)
        kept = [n for n in left_out if src.tensors[n].numpy_dtype is not None]
        _write_atomically(out / UNCOMPRESSED, lambda p: write_safetensors(p, [
            (n, src.tensors[n].dtype, src.tensors[n].shape, lambda n=n: src.read_bytes(n)) for n in kept]))
    finally:
        shutil.rmtree(out / ".unpacked", ignore_errors=True)
    return manifest


def _check_output_folder(out, manifest):
    if not out.exists():
        return
    if not out.is_dir():
        raise CheckpointError(f"{out} exists and is not a folder")
    path = out / MANIFEST
    if not path.exists():
        if any(out.iterdir()):
            raise CheckpointError(f"{out} is not empty and holds no {MANIFEST}: choose a new or empty output folder")
        return
    old = load_manifest(out)
    for key, what in (("fingerprint", "another checkpoint"), ("settings", "other settings")):
        if old.get(key) != manifest[key]:
            raise CheckpointError(f"{out} holds the results of {what} ({old.get('source')}, {old.get('settings')}); "
                                  "use another output folder or delete it")


def load_manifest(out):
    path = Path(out) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{out}: not a compressed checkpoint (no {MANIFEST})") from None
    except ValueError as e:
        raise CheckpointError(f"{path}: corrupt ({e})") from None
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise CheckpointError(f"{path}: not a {FORMAT} manifest of version {VERSION}")
    return manifest


def layer_rows(out):
    """(manifest, per-layer statistics of the finished layers in manifest order, names not finished)."""
    manifest = load_manifest(out)
    rows, missing = [], []
    for name in manifest["compressed"]:
        path = layer_paths(out, name)[1]
        if path.exists():
            rows.append(json.loads(path.read_text()))
        else:
            missing.append(name)
    return manifest, rows, missing


def totals(rows):
    weights = sum(r["shape"][0] * r["shape"][1] for r in rows)
    nbytes = sum(r["total_bytes"] for r in rows)
    sq_err, sq_ref = sum(r["sum_sq_error"] for r in rows), sum(r["sum_sq_weights"] for r in rows)
    return {
        "name": f"total ({len(rows)} layers)", "shape": None, "weights": weights, "total_bytes": nbytes,
        "density": sum(r["density"] * r["shape"][0] * r["shape"][1] for r in rows) / weights,
        "bits_per_weight": 8 * nbytes / weights, "compression": 16 * weights / (8 * nbytes),
        "rel_rms_error": float(np.sqrt(sq_err / sq_ref)) if sq_ref > 0 else 0.0,
        "max_abs_error": max(r["max_abs_error"] for r in rows),
    }


INSPECT_COLUMNS = {
    "name": ("layer", "{}"),
    "shape": ("shape", lambda s: "" if s is None else f"{s[0]} x {s[1]}"),
    "density": ("density", "{:.4f}"),
    "bits_per_weight": ("bits/weight", "{:.3f}"),
    "compression": ("vs BF16", "{:.2f}x"),
    "rel_rms_error": ("rel. RMS err", "{:.3e}"),
    "max_abs_error": ("max err", "{:.3e}"),
}


def format_inspection(out):
    manifest, rows, missing = layer_rows(out)
    s = manifest["settings"]
    lines = [f"checkpoint {manifest['source']}", f"scheme {s['scheme']}, density {s['density'] or 1}, "
             f"group size {s['group_size'] or 'default'}; {len(rows)} of {len(manifest['compressed'])} layers done"]
    if rows:
        lines.append(format_table(rows + [totals(rows)], INSPECT_COLUMNS))
    if missing:
        lines.append(f"not finished ({len(missing)}; run the same compress command to resume): {', '.join(missing)}")
    by_reason = {}
    for name, reason in manifest["left_out"].items():
        by_reason.setdefault(reason, []).append(name)
    lines.append(f"left out ({len(manifest['left_out'])}, kept unchanged in {UNCOMPRESSED}):")
    lines += [f"  {reason} ({len(names)}): {', '.join(names)}" for reason, names in by_reason.items()]
    return "\n".join(lines)


def decompress_checkpoint(out, path, dtype="bf16", engine="numpy"):
    """Write the whole model (decompressed layers and the tensors left out) as a safetensors file;
    ``engine`` as in ``decompress``."""
    if dtype not in ("bf16", "float32"):
        raise ValueError(f"dtype must be bf16 or float32, got {dtype!r}")
    manifest, _, missing = layer_rows(out)
    if missing:
        raise CheckpointError(f"{out}: {len(missing)} layers are not finished (first: {missing[0]}); "
                              "run the compress command again to finish them")
    kept = open_checkpoint(Path(out) / UNCOMPRESSED) if manifest["left_out"] else None
    compressed = set(manifest["compressed"])

    def layer(name):
        cm = load(layer_paths(out, name)[0])
        bits = decompress(cm, engine=engine)
        if dtype == "bf16" and cm.tensor_scale == 1.0:
            return np.ascontiguousarray(bits)
        w = (bf16_to_f32(bits).astype(np.float64) * cm.tensor_scale).astype(np.float32)
        return w if dtype == "float32" else f32_to_bf16(w)

    items = []
    for t in manifest["tensors"]:
        name = t["name"]
        if name in compressed:
            items.append((name, "BF16" if dtype == "bf16" else "F32", t["shape"], lambda n=name: layer(n)))
        elif name in kept.tensors:
            items.append((name, t["dtype"], t["shape"], lambda n=name: kept.read_bytes(n)))
    write_safetensors(path, items)
    return len(items)
