"""The Roof-Surface model (deca.sim): the paper's Table 2, the bubble model, the W x L exploration, the CLI.

Reference values are the paper's numbers or independent computations (plain loops, scipy.stats.binom
pmf enumeration, byte counts of real compressed matrices), never outputs of the code under test.
"""

import math

import matplotlib
import numpy as np
import pytest
from scipy.stats import binom

matplotlib.use("Agg")

from deca.cli import main  # noqa: E402
from deca.golden import SCHEMES, compress, save  # noqa: E402
from deca.golden.format import Q_BITS  # noqa: E402
from deca.hw.params import W_CHOICES, ParameterError, dequant_lanes  # noqa: E402
from deca.sim.model.bubbles import bpv_expected, bpv_monte_carlo  # noqa: E402
from deca.sim.model.dse import choose, design_grid, explore, placeholder_cost, speedup  # noqa: E402
from deca.sim.model.engines import SOFTWARE_CYCLES_PER_TILE, DecaEngine, SoftwareEngine  # noqa: E402
from deca.sim.model.kernels import kernel, kernel_from_matrix  # noqa: E402
from deca.sim.model.platform import PRESETS, Platform, get_platform, load_platforms  # noqa: E402
from deca.sim.model.roof import eq3, predict, roof_surface  # noqa: E402

HBM = PRESETS["spr-hbm"]

# Paper, Table 2 (N = 16, SPR with HBM, TFLOPS): (scheme, density) -> (R-L, R-S).
TABLE2 = {
    ("mxfp4", None): (25.2, 11.5), ("bf8", None): (13.3, 13.3),
    ("bf8", 0.5): (21.2, 16.1), ("bf8", 0.3): (31.2, 16.1), ("bf8", 0.2): (40.8, 16.1),
    ("bf8", 0.1): (59.2, 16.1), ("bf8", 0.05): (70.0, 16.1),
    ("bf16", 0.5): (11.8, 11.8), ("bf16", 0.3): (18.4, 18.4), ("bf16", 0.2): (25.2, 23.0),
    ("bf16", 0.1): (40.8, 23.0), ("bf16", 0.05): (59.2, 23.0),
}
# Section 4.1: these three are MEM-bound in both models; the software leaves the rest VEC-bound.
PAPER_MEM_BOUND = {("bf8", None), ("bf16", 0.5), ("bf16", 0.3)}
ALL_LS = [(W, L) for W in W_CHOICES for L in (1, 2, 4, 8, 16, 32, 64) if L <= W]


def table2_kernels():
    return [kernel(s, d) for s, d in TABLE2]


def paper_bytes_per_tile(q, density, scale_bytes=0):
    """Section 2.2's footprint: Q*d bits per weight plus one mask bit when sparse, for 512 weights."""
    return 512 * (q * (1 if density is None else density) + (density is not None)) / 8 + scale_bytes


# Table 2 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("scheme", "density"), list(TABLE2))
def test_roofline_row_matches_table2(scheme, density):
    k = kernel(scheme, density)
    # MXFP4 carries one E8M0 byte per 32 weights: 16 bytes a tile.
    expected_bytes = paper_bytes_per_tile(SCHEMES[scheme].q_bits, density, 16 if scheme == "mxfp4" else 0)
    assert k.bytes_per_tile == pytest.approx(expected_bytes)
    assert predict(HBM, k, None, 16).flops / 1e12 == pytest.approx(TABLE2[scheme, density][0], rel=0.03)


@pytest.mark.parametrize(("scheme", "density"), list(TABLE2))
def test_roof_surface_row_and_bounds_match_table2(scheme, density):
    p = predict(HBM, kernel(scheme, density), SoftwareEngine(), 16)
    assert p.flops / 1e12 == pytest.approx(TABLE2[scheme, density][1], rel=0.03)
    assert p.bound == ("MEM" if (scheme, density) in PAPER_MEM_BOUND else "VEC")


def test_bounds_match_the_papers_bords():
    # Fig. 5b (DDR): every kernel but BF8_10% and BF8_5% is MEM-bound with software decompression.
    ddr = {k.name: predict(PRESETS["spr-ddr"], k, SoftwareEngine(), 16).bound for k in table2_kernels()}
    assert {name for name, bound in ddr.items() if bound != "MEM"} == {"BF8_10%", "BF8_5%"}
    # Fig. 5c: four times the vector throughput on HBM still leaves some kernel VEC-bound.
    faster = SoftwareEngine({c: v / 4 for c, v in SOFTWARE_CYCLES_PER_TILE.items()})
    assert any(predict(HBM, k, faster, 16).bound == "VEC" for k in table2_kernels())


@pytest.mark.parametrize(("scheme", "density"), [("bf8", 0.3), ("mxfp4", None), ("int4", 0.2), ("nvfp4", 0.5),
                                                 ("int8", None), ("ternary", None), ("bf16", 0.05)])
def test_expected_bytes_per_tile_match_real_compressed_matrices(rng, scheme, density):
    w = rng.standard_normal((256, 1024)).astype(np.float32)
    cm = compress(w, scheme, density=density)
    measured = sum(cm.stream_bytes().values()) / cm.num_tiles
    # The model takes the mean stored count; real streams round each tile up to whole bytes.
    k = kernel(scheme, cm.density if cm.config.sparse else None, k=1024)
    assert measured - 1 <= k.bytes_per_tile <= measured
    assert kernel_from_matrix(cm).bytes_per_tile == pytest.approx(measured)


def test_every_scheme_has_a_signature_at_every_density():
    for scheme in SCHEMES:
        extra = {"codebook": [-1.0, 0.0, 0.5, 1.0]} if scheme == "codebook" else {}
        for d in (None, 0.0, 0.25, 1.0):
            k = kernel(scheme, d, **extra)
            assert 0 < k.bytes_per_tile <= 1024 + 64 + 64 and k.ai_xm == 1 / k.bytes_per_tile


# The model's equations ---------------------------------------------------------------------------


def test_eq3_is_the_minimum_with_its_domain():
    assert eq3({"MEM": (100.0, 0.5), "V": (10.0, 2.0), "T": (30.0, 1.0)}) == (20.0, "V")
    # Ties within the tolerance go to the earlier domain.
    assert eq3({"MEM": (100.0, 0.5), "T": (20.1, 1.0), "V": (20.0, 1.0)}) == (20.0, "T")
    assert eq3({"MEM": (100.0, 0.5), "T": (20.1, 1.0), "V": (20.0, 1.0)}, rtol=0) == (20.0, "V")


def test_roof_surface_equation_against_hand_arithmetic():
    # BF8_20% on HBM: 166.4 B/tile -> 830e9 / 166.4 tiles/s; a vOp budget of 1/50 per tile.
    tps, flops, bound = roof_surface(HBM, 1 / 166.4, 1 / 50, n=16)
    mem, vec, mtx = 830e9 / 166.4, 56 * 2.5e9 / 50, 56 * 2.5e9 / 16
    assert tps == pytest.approx(min(mem, vec, mtx)) and bound == "VEC"
    assert flops == pytest.approx(512 * 16 * min(mem, vec, mtx))


def test_batch_size_scaling():
    k = kernel("bf16", 0.5)
    base = predict(HBM, k, None, 16)
    for n in (1, 4, 16):  # N <= 16: same TPS and bound, FLOPS proportional to N (appendix 12.2)
        p = predict(HBM, k, None, n)
        assert p.tps == pytest.approx(base.tps) and p.bound == base.bound
        assert p.flops == pytest.approx(base.flops * n / 16)
    # N = 64: the tile feeds 4 TMUL operations, so the memory term is 4x: 4 * 830e9 / 576 tile ops/s.
    p64 = predict(HBM, k, None, 64)
    assert p64.tps == pytest.approx(4 * 830e9 / 576) and p64.flops == pytest.approx(512 * 16 * 4 * 830e9 / 576)
    # ...until the TMUL saturates at 512*16 FMAs per 16 cycles per core.
    assert predict(HBM, k, None, 1024).flops == pytest.approx(512 * 56 * 2.5e9)


# Bubbles ---------------------------------------------------------------------------------------------


def enumerated_bpv(W, lanes, d):
    """E[max(1, ceil(Wnd/Lq)) - 1] with Wnd ~ Binomial(W, d), by summing over every Wnd."""
    return sum(binom.pmf(n, W, d) * (max(1, math.ceil(n / lanes)) - 1) for n in range(W + 1))


@pytest.mark.parametrize(("W", "L"), ALL_LS)
def test_closed_form_bpv_equals_binomial_enumeration(W, L):
    for q in (8, 7, 4, 16):
        lanes = dequant_lanes(q, L)
        for d in (0.0, 0.05, 0.3, 0.5, 0.9, 1.0):
            assert bpv_expected(W, L, q, True, d) == pytest.approx(enumerated_bpv(W, lanes, d), abs=1e-12)


@pytest.mark.parametrize("q", Q_BITS)
def test_dense_bpv_is_ceil_w_over_lq_minus_one(q):
    for W, L in ALL_LS:
        # Paper 6.2 for Q <= 8; Q = 16 (no LUT) follows the hardware's documented choice.
        lanes = dequant_lanes(16, L) if q == 16 else {8: L, 7: 2 * L}.get(q, 4 * L)
        assert bpv_expected(W, L, q, False, 1.0) == math.ceil(W / lanes) - 1


@pytest.mark.parametrize(("scheme", "density", "W", "L"), [
    ("bf8", 0.3, 32, 8), ("bf8", 0.5, 64, 4), ("mxfp4", 0.5, 16, 2), ("bf16", 0.2, 8, 1), ("int2", 0.05, 32, 1),
])
def test_monte_carlo_bpv_matches_closed_form_on_uniform_masks(rng, scheme, density, W, L):
    w = rng.standard_normal((2048, 2048)).astype(np.float32)
    cm = compress(w, scheme, mask=rng.random(w.shape) < density)
    closed = bpv_expected(W, L, cm.config.q_bits, True, density)
    # 4M elements: the sampling error is a few times below 1%; the absolute term covers bpv ~ 0.
    assert bpv_monte_carlo(cm, W, L) == pytest.approx(closed, rel=0.01, abs=0.002)


def test_monte_carlo_bpv_follows_the_hardware_element_order(rng):
    # Even matrix rows fully stored, odd rows empty. A W = 32 vOp is one 32-element tile row, so
    # windows alternate 32 and 0; a W = 64 vOp covers a stored row and an empty one.
    w = rng.standard_normal((64, 128)).astype(np.float32)
    mask = np.zeros(w.shape, bool)
    mask[::2] = True
    cm = compress(w, "bf8", mask=mask)
    assert bpv_monte_carlo(cm, 32, 8) == pytest.approx((3 + 0) / 2)   # ceil(32/8) - 1 = 3 on half the vOps
    assert bpv_monte_carlo(cm, 64, 8) == pytest.approx(3)             # every window is 32
    assert bpv_monte_carlo(cm, 16, 8) == pytest.approx((1 + 0) / 2)
    # The binomial model assumes uniform masks; at d = 0.5 it predicts another value (why we measure).
    assert abs(bpv_expected(32, 8, 8, True, 0.5) - 1.5) > 0.05
    # A DECA engine uses the measured windows of a kernel taken from a real matrix.
    assert DecaEngine(32, 8).vo_tile(kernel_from_matrix(cm)) == pytest.approx(16 * 2.5)



def test_kernel_of_the_first_tiles_counts_their_bytes_and_masks(rng):
    """A run of the first n tiles reads their streams only (a scale block shared with later tiles
    once) and sees their masks: two dense-ish tiles ahead of sparse ones, int4 with 128-element
    groups, so scale blocks are shared across tiles."""
    w = rng.standard_normal((16, 32 * 8)).astype(np.float32)
    mask = np.zeros(w.shape, bool)
    mask[:, :64] = True                      # tiles 0 and 1 fully stored
    mask[:, 64:] = rng.random((16, 192)) < 0.1
    cm = compress(w, "int4", mask=mask, group_size=128)
    _, meta = cm.memory_image(base=0, align=1)
    for n in (1, 2, 5, cm.num_tiles):
        first = meta[:n]
        scales = {(a, b) for a, b in zip(first["scale_addr"], first["scale_len"])}
        expected = int(first["val_len"].sum() + first["mask_len"].sum()) + sum(b for _, b in scales)
        assert kernel_from_matrix(cm, tiles=n).bytes_per_tile == pytest.approx(expected / n), n
    assert kernel_from_matrix(cm, tiles=cm.num_tiles).bytes_per_tile == kernel_from_matrix(cm).bytes_per_tile
    # Fully stored tiles: every W = 32 window holds 32 elements, ceil(32/8) - 1 = 3 bubbles for Q = 4
    # with L = 2 (Lq = 8 lanes); the sparse tiles after them would bring the mean down.
    assert DecaEngine(32, 2).bpv(kernel_from_matrix(cm, tiles=2)) == pytest.approx(3)
    assert DecaEngine(32, 2).bpv(kernel_from_matrix(cm)) < 2
    for bad in (0, cm.num_tiles + 1, 1.5, True):
        with pytest.raises(ValueError, match="tiles must be 1..8"):
            kernel_from_matrix(cm, tiles=bad)

# Design-space exploration -------------------------------------------------------------------------


def test_dse_reproduces_the_papers_choice():
    points = {(p.W, p.L): p for p in explore(HBM, table2_kernels(), design_grid(W_CHOICES, (1, 2, 4, 8, 16, 32, 64)))}
    assert points[8, 4].vec_bound and not points[32, 8].vec_bound and not points[64, 64].vec_bound
    assert (choose(points.values()).W, choose(points.values()).L) == (32, 8)
    # Paper 8.2: {64, 64} is under 3% faster than {32, 8}; {32, 8} is about 2x faster than {8, 4}.
    assert 1 <= speedup(points[64, 64], points[32, 8]) < 1.03
    assert 1.5 < speedup(points[32, 8], points[8, 4]) < 2.5
    assert placeholder_cost(32, 8) == 8 * 256 + 32 * 33 // 2


def test_dse_cost_can_be_a_mapping_of_measured_area():
    area = {(32, 8): 5.0, (64, 64): 50.0}
    points = explore(HBM, table2_kernels(), [(32, 8), (64, 64)], cost=area)
    assert [p.cost for p in points] == [5.0, 50.0]
    with pytest.raises(ValueError, match="no hardware cost given for design W=16, L=4"):
        explore(HBM, table2_kernels(), [(16, 4)], cost=area)


def test_dse_cli_prints_speedups_and_agreement(tmp_path, capsys):
    assert main(["model", "dse", "--W", "8,16,32,64", "--L", "4,8,16,32,64", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "model's choice (fewest LUTs, then smallest W, no kernel VEC-bound): {W=32, L=8}" in out
    assert "agrees with the paper's choice {W=32, L=8}" in out
    assert "speedup {W=32, L=8} over {W=8, L=4}:" in out and "speedup {W=64, L=64} over {W=32, L=8}:" in out
    assert (tmp_path / "dse.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = (tmp_path / "dse.csv").read_text().splitlines()
    assert len(lines) == 1 + 14 and lines[0].startswith("W,L,cost,MXFP4 TFLOPS")


def test_dse_cli_says_when_it_disagrees_with_the_paper(tmp_path, capsys):
    # Without W = 32 or 64 no design escapes the VEC region; the output must say so.
    assert main(["model", "dse", "--W", "8,16", "--L", "1,2,4,8,16", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "none: every design leaves a kernel VEC-bound" in out and "DISAGREES with the paper" in out


# Command line ------------------------------------------------------------------------------------


def test_table_cli(capsys):
    assert main(["model", "table", "--baseline", "none"]) == 0
    out = capsys.readouterr().out
    assert "bounds agree with the paper for all 12 kernels" in out
    assert len([line for line in out.splitlines() if line.lstrip().startswith(("MXFP4", "BF8", "BF16"))]) == 12


def test_roof_cli_reports_both_engines(capsys):
    assert main(["model", "roof", "--platform", "spr-hbm", "--n", "16", "--scheme", "bf8", "--density", "0.3",
                 "--baseline", "none"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[1]: line.split() for line in out.splitlines() if line.startswith("BF8_30%")}
    assert set(rows) == {"roofline", "software", "DECA"}
    assert rows["software"][-2:] == ["16.15", "VEC"] and rows["DECA"][-1] == "MEM"


def test_roof_cli_on_a_real_matrix_and_unknown_software_cost(tmp_path, rng, capsys):
    w = rng.standard_normal((64, 256)).astype(np.float32)
    save(compress(w, "int4", density=0.3), tmp_path / "w.deca")
    assert main(["model", "roof", "--matrix", str(tmp_path / "w.deca")]) == 0
    out = capsys.readouterr().out
    assert "measured from" in out and "no cost known for scheme class 'int4-sparse'" in out
    assert main(["model", "roof", "--matrix", str(tmp_path / "w.deca"), "--sw-cycles", "int4-sparse=80"]) == 0
    assert "INT4_30%     software" in capsys.readouterr().out


def test_user_platform_from_toml_and_flags(tmp_path, capsys):
    path = tmp_path / "p.toml"
    path.write_text('[edge]\ncores = 8\nfrequency_ghz = 2.0\nbandwidth_gbs = 100\n')
    p = get_platform("edge", path)
    assert (p.cores, p.freq_hz, p.mem_bw, p.mos) == (8, 2e9, 100e9, 1e9)
    assert main(["model", "roof", "--platforms", str(path), "--platform", "edge", "--scheme", "mxfp4"]) == 0
    assert "edge: 8 cores x 2 GHz, 100 GB/s" in capsys.readouterr().out
    assert main(["model", "roof", "--scheme", "mxfp4", "--bw-gbs", "50", "--cores", "4"]) == 0
    assert "spr-hbm: 4 cores x 2.5 GHz, 50 GB/s" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["bord", "surface"])
def test_plot_commands_write_png_and_csv(tmp_path, capsys, command):
    assert main(["model", command, "--out", str(tmp_path), "--kernels", "mxfp4,bf8:0.1,bf16"]) == 0
    assert (tmp_path / f"{command}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = (tmp_path / f"{command}.csv").read_text().splitlines()
    panels = 4 if command == "bord" else 2  # software + DECA designs
    assert rows[0] == "kernel,engine,ai_xm,ai_xv,tps,flops,bound" and len(rows) == 1 + 3 * panels
    assert "BF16" in capsys.readouterr().out  # dense BF16: no software work, AI_XV infinite, still plotted


@pytest.mark.parametrize(("argv", "message"), [
    (["roof", "--platform", "nope", "--scheme", "bf8"], "unknown platform 'nope'; known platforms: spr-hbm, spr-ddr"),
    (["roof", "--scheme", "fp5"], "unknown scheme 'fp5'"),
    (["roof", "--scheme", "bf8", "--W", "24"], "W must be one of 8, 16, 32, 64"),
    (["roof", "--scheme", "bf8", "--W", "8", "--L", "16"], "L = 16 LUTs exceeds W = 8"),
    (["roof", "--scheme", "bf8", "--density", "1.5"], "density must be a number in [0, 1], got 1.5"),
    (["roof", "--scheme", "bf8", "--density", "-0.1"], "density must be a number in [0, 1]"),
    (["roof", "--scheme", "bf8", "--bw-gbs", "0"], "memory bandwidth must be a positive number"),
    (["roof", "--scheme", "bf8", "--bw-gbs", "-5"], "memory bandwidth must be a positive number"),
    (["roof", "--scheme", "bf8", "--n", "0"], "batch size N must be a positive integer"),
    (["roof"], "give --scheme"),
    (["dse", "--W", "8,12"], "W must be one of 8, 16, 32, 64"),
    (["dse", "--L", "3"], "L must be a power of two"),
    (["dse", "--kernels", "bf8:half"], "kernel 'bf8:half': density must be a number"),
])
def test_bad_input_is_a_clear_error(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        main(["model", *argv, *(["--out", str(tmp_path)] if argv[0] == "dse" else [])])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("deca model: error: ") and message in err


def test_bad_platform_definitions(tmp_path):
    with pytest.raises(ValueError, match="memory bandwidth must be a positive number"):
        Platform("x", 4, 1e9, -1.0)
    with pytest.raises(ValueError, match="cores must be a positive integer"):
        Platform("x", 0, 1e9, 1e9)
    path = tmp_path / "p.toml"
    path.write_text('[x]\ncores = 4\nfrequency_ghz = 2\nbandwidth_ghz = 10\n')
    with pytest.raises(ValueError, match="unknown: bandwidth_ghz; missing: bandwidth_gbs"):
        load_platforms(path)
    path.write_text('[x]\ncores = 4\nfrequency_ghz = "fast"\nbandwidth_gbs = 10\n')
    with pytest.raises(ValueError, match="frequency must be a positive number, got 'fast'"):
        load_platforms(path)
    with pytest.raises(ParameterError, match="L = 64 LUTs exceeds W = 32"):
        DecaEngine(32, 64)
