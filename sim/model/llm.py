"""Next-token time of a decoder-only transformer on a CPU with AMX, with and without DECA (paper,
section 8.4): the FC GeMMs from the Roof-Surface, the rest modelled explicitly plus a calibrated
per-layer overhead.

One generation step of a batch of N sequences, each attending over ``c`` cached tokens, takes

    T = sum over FC layers f of  count_f * E_f * tiles_f * ceil(n_f/16) / TPS_f(system, n_f)  (FC GeMMs)
      + layers * max(N c kv_bytes / MBW, N c 2 q_dim / VFMA)                           (attention)
      + layers * N * elementwise_bytes / MBW                       (norms, rotary, residuals, MLP act.)
      + LM head GeMM (Roof-Surface, BF16 unless compressed) + N * vocab * 4 / MBW        (head, sampling)
      + layers * (t0 + t1 N) / f                                   (overhead, calibrated on Table 1)

with TPS from ``roof.roof_surface`` (Eq. 1 with the tile reuse of N > 16). A dense layer has E = 1
and n = N; an expert layer of E0 experts, k per token, has the E = E0 (1 - (1 - k/E0)^N) experts
that N uniformly routed tokens touch on average, each taking n = ceil(N k / E) of them. ``c`` is
the average context of the generation: prompt + (generated + 1) / 2. The systems differ in the FC GeMMs only:
Baseline reads BF16 (no vector work), Software-only and DECA decompress on their engine, Optimal
is the classic roofline of the compressed weights.
"""

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from deca.errors import UsageError
from deca.golden.format import TILE_COLS, TILE_ROWS

from . import paper
from .arch import preset
from .engines import DecaEngine, SoftwareEngine, scheme_class
from .kernels import kernel
from .platform import PRESETS
from .roof import roof_surface, tile_ops_per_weight_tile

#: BF16 FMAs per cycle per core of the vector units for attention: two AVX-512 FMA ports of 16 lanes.
VECTOR_FMAS_PER_CYCLE = 32
#: Bytes of activations the element-wise operators of one layer move per sequence, in units of the
#: hidden size (h) and the MLP size (i): 2 RMS/layer norms (read h, write h), 2 residual adds (read 2h,
#: write h), rotary on Q and K (read and write q_dim + kv_dim, counted as 2h), and the MLP's
#: activation (gated: read 2i write i; else read i write i). BF16 values.
NORM_RESIDUAL_H, ROTARY_H = 10, 2

SYSTEMS = ("baseline", "sw", "deca", "optimal")
SYSTEM_NAMES = {"baseline": "Baseline", "sw": "SW-only", "deca": "DECA", "optimal": "Optimal"}
PARTS = ("fc", "attention", "elementwise", "head", "overhead")
PART_NAMES = {"fc": "FC GeMMs", "attention": "attention (KV cache)", "elementwise": "norms, rotary, residuals",
              "head": "LM head + sampling", "overhead": "overhead (calibrated)"}


@dataclass(frozen=True)
class Overhead:
    """Per decoder layer and step: t0 + t1 * N core cycles of the operators around the GeMMs."""

    t0: float
    t1: float
    note: str


def context(prompt, generate):
    """Average cached tokens a generation step attends over (the new token included)."""
    for what, v, least in (("prompt length", prompt, 0), ("generation length", generate, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < least:
            raise UsageError(f"{what} must be an integer >= {least}, got {v!r}")
    return prompt + (generate + 1) / 2


def check_batch(n):
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UsageError(f"batch size N must be a positive integer, got {n!r}")
    return n


@lru_cache(maxsize=None)
def _kernel(scheme, density, cols, group_size, codebook):
    return kernel(scheme, density, group_size, codebook, k=cols)


def fc_kernel(fc, dense_bf16=False):
    """The Roof-Surface kernel of an FC layer: its scheme's bytes per tile (the checkpoint's measured
    bytes when it has them); ``dense_bf16``: the uncompressed BF16 weights instead."""
    if dense_bf16:
        return _kernel("bf16", None, fc.cols, None, None)
    k = _kernel(fc.scheme, fc.density, fc.cols, fc.group_size, fc.codebook)
    return k if fc.bytes_per_tile is None else replace(k, bytes_per_tile=fc.bytes_per_tile)


def weight_tiles(fc):
    """Tiles of one of the layer's matrices, times its count (decoder layers)."""
    return math.ceil(fc.rows / TILE_ROWS) * math.ceil(fc.cols / TILE_COLS) * fc.count


def routing(fc, n):
    """(matrices of the layer a batch of N reads, the batch rows each of them multiplies)."""
    if fc.experts == 1:
        return 1, n
    touched = fc.experts * (1 - (1 - fc.active / fc.experts) ** n)
    return touched, math.ceil(n * fc.active / touched)


class Engines:
    """The decompression engines of the systems and where their costs come from.

    Software-only: ``measured_software`` (a ``MeasuredSoftwareEngine`` of ``deca baseline``) for the
    scheme classes it measured, else ``software`` (paper-derived ``SoftwareEngine``). DECA: the TEPL
    records of a ``deca run``/``deca sweep`` folder (``deca_records``) for the kernels they measured
    (pipeline cycles per tile: vOps plus bubbles), else the bubble model of a (W, L) PE.
    """

    def __init__(self, software=None, W=32, L=8, deca_records=(), records_source=None, measured_software=None):
        self.software = software or SoftwareEngine()
        self.measured_software = measured_software
        self.deca = DecaEngine(W, L)
        self.records = [r for r in deca_records if r["W"] == W and r["L"] == L and r.get("mode") == "tepl"]
        self.records_source = records_source

    def software_source(self):
        paper_derived = "paper-derived (Table 2)" + ("" if self.software == SoftwareEngine() else " with --sw-cycles")
        if self.measured_software is None:
            return paper_derived
        return f"measured by deca baseline ({self.measured_software.describe()}), else {paper_derived}"

    def measured_deca(self, k):
        """DECA cycles per tile measured on the RTL for kernel ``k``, or None."""
        for r in self.records:
            if r["scheme"] == k.scheme and abs(r["density"] - k.density) <= 0.01 and (r["density"] < 1) == k.sparse:
                return (r["vops"] + r["bubbles"]) / r["tiles"]
        return None

    def vo_tile(self, system, k):
        """(VO_tile, source) of kernel ``k`` on a system's engine; VO None: the classic roofline, NaN:
        no cost known."""
        if system in ("baseline", "optimal") or scheme_class(k) == "bf16":
            return None, "roofline"
        if system == "sw":
            if self.measured_software is not None and self.measured_software.measures(k):
                return self.measured_software.vo_tile(k), "software measured by deca baseline"
            if scheme_class(k) in self.software.cycles:
                return self.software.vo_tile(k), "software paper-derived (Table 2)"
            return math.nan, f"no software cost for {scheme_class(k)} (give --sw-cycles)"
        measured = self.measured_deca(k)
        if measured is not None:
            return measured, f"DECA RTL records {self.records_source}"
        return self.deca.vo_tile(k), f"DECA bubble model W{self.deca.W} L{self.deca.L}"


def fc_time(platform, fc, n, system, engines):
    """(seconds, source) of one FC layer's GeMM for batch N on a system."""
    k = fc_kernel(fc, dense_bf16=system == "baseline")
    vo, source = engines.vo_tile(system, k)
    if vo is not None and math.isnan(vo):
        return math.nan, source
    matrices, rows = routing(fc, n)
    tps, _, _ = roof_surface(platform, k.ai_xm, None if vo is None else (math.inf if vo == 0 else 1 / vo), rows)
    return matrices * weight_tiles(fc) * tile_ops_per_weight_tile(rows) / tps, source


def explicit_parts(platform, arch, n, ctx):
    """Seconds of the non-GeMM parts that are modelled physically (no LM head GeMM)."""
    vfma = platform.cycles_per_s * VECTOR_FMAS_PER_CYCLE
    kv = n * ctx * 2 * arch.kv_dim * 2  # K and V, BF16
    attention = arch.layers * max(kv / platform.mem_bw, n * ctx * 2 * arch.q_dim / vfma)
    act = (3 if arch.gated else 2) * arch.inter
    elementwise = arch.layers * n * 2 * ((NORM_RESIDUAL_H + ROTARY_H) * arch.hidden + act) / platform.mem_bw
    sampling = n * arch.vocab * 4 / platform.mem_bw  # FP32 logits read once
    return {"attention": attention, "elementwise": elementwise, "sampling": sampling}


def next_token(platform, arch, n, ctx, system, engines, overhead):
    """Seconds of one generation step split into PARTS, and the FC engine's source per layer kind."""
    check_batch(n)
    parts = dict.fromkeys(PARTS, 0.0)
    sources = {}
    for fc in arch.fcs:
        t, source = fc_time(platform, fc, n, system, engines)
        parts["head" if fc.kind == "lm_head" else "fc"] += t
        if fc.kind != "lm_head":
            sources.setdefault(source, []).append(fc.kind)
    ex = explicit_parts(platform, arch, n, ctx)
    parts["attention"] = ex["attention"]
    parts["elementwise"] = ex["elementwise"]
    parts["head"] += ex["sampling"]
    parts["overhead"] = arch.layers * (overhead.t0 + overhead.t1 * n) / platform.freq_hz
    return parts, sources


# Calibration ---------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def calibrate():
    """The overhead's t0 and t1, fitted on Table 1 (Llama2-70B, BF16) with this model's other parts.

    t0 + t1: at N = 1 on HBM with a 128-token prompt, the FC GeMMs take 85.9% of the step. t1 / t0:
    from N = 1 to N = 16 the non-GeMM time grows by the factor Table 1's DDR rows show (the GeMMs,
    memory-bound, take the same time at both N there), averaged over its two prompt lengths. The
    generation length is taken as Table 6's (128 tokens); Table 1 does not give one.
    """
    arch, sw = preset("llama2-70b"), Engines()
    zero = Overhead(0.0, 0.0, "")

    def split(platform, n, prompt):
        parts, _ = next_token(platform, arch, n, context(prompt, paper.LLM_GENERATE), "baseline", sw, zero)
        return parts["fc"], sum(parts.values()) - parts["fc"]

    growth = []
    for prompt in sorted({p for _, p in paper.TABLE1_DDR}):
        other = [gemm * (100 / paper.TABLE1_DDR[n, prompt] - 1) for n in (1, 16)
                 for gemm, _ in [split(PRESETS["spr-ddr"], n, prompt)]]
        growth.append(other[1] / other[0])
    rho = sum(growth) / len(growth)
    hbm = PRESETS["spr-hbm"]
    gemm1, rest1 = split(hbm, 1, 128)
    _, rest16 = split(hbm, 16, 128)
    x1 = gemm1 * (100 / paper.TABLE1_HBM_N1[128] - 1) - rest1  # overhead seconds at N = 1
    x16 = rho * (x1 + rest1) - rest16  # and at N = 16
    t1 = (x16 - x1) / 15 / arch.layers * hbm.freq_hz
    t0 = x1 / arch.layers * hbm.freq_hz - t1
    note = (f"overhead per decoder layer t0 + t1 N = {t0:,.0f} + {t1:,.0f} N core cycles, fitted on Table 1 "
            f"(Llama2-70B BF16: FC GeMMs {paper.TABLE1_HBM_N1[128]}% of the step on HBM at N = 1, 128-token prompt; "
            f"non-GeMM time x{rho:.2f} from N = 1 to 16 as in its DDR rows)")
    return Overhead(t0, t1, note)


# Whole-model tables --------------------------------------------------------------------------------


def evaluate(platform, arch, batches, prompt, generate, engines, overhead=None, systems=SYSTEMS):
    """Rows per (N, system): latency, tokens/s, the split into PARTS and the FC engine sources."""
    overhead = overhead or calibrate()
    ctx = context(prompt, generate)
    rows = []
    for n in batches:
        for system in systems:
            parts, sources = next_token(platform, arch, check_batch(n), ctx, system, engines, overhead)
            total = sum(parts.values())
            rows.append({"model": arch.name, "platform": platform.name, "N": n, "system": system,
                         "latency_ms": 1e3 * total, "tokens_per_s": n / total,
                         **{f"{p}_ms": 1e3 * parts[p] for p in PARTS},
                         "gemm_share": parts["fc"] / total,
                         "source": next(iter(sources)) if len(sources) == 1 else
                         "; ".join(f"{s} ({', '.join(sorted(set(k)))})" for s, k in sources.items())})
    return rows


def speedups(rows):
    """Per N: DECA's speedup over Baseline and SW-only, and its latency over Optimal's."""
    by = {(r["N"], r["system"]): r["latency_ms"] for r in rows}
    out = []
    for n in dict.fromkeys(r["N"] for r in rows):
        lat = {s: by.get((n, s)) for s in SYSTEMS}
        lat = {s: None if v is None or math.isnan(v) else v for s, v in lat.items()}
        row = {"N": n, **{f"{s}_ms": lat[s] for s in SYSTEMS},
               **{f"{s}_tps": None if lat[s] is None else n / lat[s] * 1e3 for s in SYSTEMS}}
        for s in ("baseline", "sw", "optimal"):
            row[f"deca_over_{s}"] = lat[s] / lat["deca"] if lat[s] and lat["deca"] else None
        out.append(row)
    return out


def knee(batches, latencies, efficiency=0.9):
    """The largest N (of increasing ``batches``) up to which throughput keeps within ``efficiency`` of
    linear scaling from the first N: N / latency >= efficiency * N * (N0 / latency0) / N0."""
    n0, l0 = batches[0], latencies[0]
    last = n0
    for n, lat in zip(batches, latencies):
        if (n / lat) < efficiency * (n / n0) * (n0 / l0):
            break
        last = n
    return last


# GPUs (Table 7) ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GPU:
    name: str
    bandwidth_gbs: float
    tflops: float


#: The paper's Table 7 GPUs: bandwidth and peak compute as it lists them.
GPUS = tuple(GPU(name, bw, tf) for name, (bw, tf, _) in paper.TABLE7.items() if not name.startswith("SPR"))
#: Achievable over nominal bandwidth, the CPU preset's (830 of the paper's 850 GB/s), for the GPUs too.
GPU_BW_EFFICIENCY = PRESETS["spr-hbm"].mem_bw / 850e9


def gpu_latency(gpu, arch, n, ctx):
    """Seconds of a step on a GPU at the same level of detail: FC and LM-head GeMMs on the classic
    roofline of their compressed bytes (decompression hides under GPU vector throughput, paper 9),
    attention and element-wise traffic at the GPU's bandwidth; no calibrated CPU overhead."""
    bw = gpu.bandwidth_gbs * 1e9 * GPU_BW_EFFICIENCY
    gemm = sum(max(routing(fc, n)[0] * weight_tiles(fc) * fc_kernel(fc).bytes_per_tile / bw,
                   2 * n * fc.rows * fc.cols * fc.count * fc.active / (gpu.tflops * 1e12)) for fc in arch.fcs)
    kv = arch.layers * n * ctx * 2 * arch.kv_dim * 2 / bw
    act = arch.layers * n * 2 * ((NORM_RESIDUAL_H + ROTARY_H) * arch.hidden + (3 if arch.gated else 2) * arch.inter) / bw
    return gemm + kv + act + n * arch.vocab * 4 / bw
