"""Bubbles per vOp (bpv) of the DECA pipeline (paper, section 6.2).

A vOp covers W consecutive tile elements; its window Wnd is how many of them are stored. The
dequantization stage turns Lq codes into BF16 per cycle, so the vOp occupies it
``vop_cycles(Wnd, Lq)`` = max(1, ceil(Wnd/Lq)) cycles, i.e. that many minus one bubbles. The
rule is the hardware's own (``deca.hw.params``).
"""

import numpy as np
from scipy.stats import binom

from deca.golden.format import TILE_ELEMS, mask_bits
from deca.hw.params import check_params, dequant_lanes, vop_cycles, vops_per_tile


def bpv_dense(W, lanes):
    """Dense mode: every window is W, so ceil(W/Lq) - 1 bubbles per vOp."""
    return int(vop_cycles(W, lanes)) - 1


def bpv_binomial(W, lanes, density):
    """Expected bubbles per vOp when each element is stored independently with probability d.

    The paper's sum over k of k * [F((k+1)Lq; W, d) - F(kLq; W, d)]: a window of
    kLq < Wnd <= (k+1)Lq values costs k bubbles. Lq >= W leaves no term (never a bubble).
    """
    k = np.arange(-(-W // lanes))
    return float(np.sum(k * (binom.cdf((k + 1) * lanes, W, density) - binom.cdf(k * lanes, W, density))))


def window_sizes(masks, W, tiles=None):
    """Wnd of every vOp of each tile, shape (tiles, 512/W): ``masks`` is (tiles, 64) bitmask bytes, or
    None for dense tiles (then ``tiles`` says how many)."""
    if masks is None:
        return np.full((tiles, vops_per_tile(W)), W)
    masks = np.asarray(masks, np.uint8).reshape(-1, TILE_ELEMS // 8)
    # The mask bit order is the order the PE consumes elements: vOp v covers elements [vW, (v+1)W).
    return mask_bits(masks).reshape(len(masks), TILE_ELEMS // W, W).sum(axis=2)


def tile_cycles(masks, q_bits, W, L):
    """Dequantization cycles of tiles (``masks``: each tile's bitmask bytes, empty when dense; or
    one tile's): the sum over their vOps of max(1, ceil(Wnd / Lq)); minus 512/W per tile, their bubbles."""
    masks = [masks] if isinstance(masks, bytes) else masks
    lanes = dequant_lanes(q_bits, L)
    dense = sum(not mask for mask in masks)
    sparse = b"".join(masks)
    cycles = dense * vops_per_tile(W) * int(vop_cycles(W, lanes))
    if sparse:
        cycles += int(vop_cycles(window_sizes(np.frombuffer(sparse, np.uint8), W), lanes).sum())
    return cycles


def bpv_monte_carlo(cm, W, L, tiles=None):
    """Mean bubbles per vOp over the real masks of ``cm`` (any pattern, e.g. pruned weights), or
    of its first ``tiles`` tiles."""
    check_params(W, L)
    lanes = dequant_lanes(cm.config.q_bits, L)
    masks = None if cm.masks is None else cm.masks[:tiles]
    count = len(masks) if masks is not None else min(cm.num_tiles, tiles or cm.num_tiles)
    return float(np.mean(vop_cycles(window_sizes(masks, W, count), lanes) - 1))


def bpv_expected(W, L, q_bits, sparse, density):
    """bpv of a uniform-density kernel on a (W, L) design: closed form, dense or binomial."""
    check_params(W, L)
    lanes = dequant_lanes(q_bits, L)
    return bpv_binomial(W, lanes, density) if sparse else bpv_dense(W, lanes)
