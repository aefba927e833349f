"""Plots of RTL measurement records (deca.sim.measure.plots) on small synthetic records."""

import matplotlib.image
import pytest

from deca.sim.measure import plots as mp
from deca.sim.measure.records import COLUMNS
from deca.sim.model.platform import get_platform

TABLE4 = {1.0: (93, 18, 75), 0.5: (92, 28, 71), 0.2: (91, 53, 63), 0.05: (73, 79, 87)}


def rec(W=8, L=4, scheme="bf8", density=1.0, mode="tepl", cycles_per_tile=86.4, bpv=0.5, batch=1, loaders=2):
    """A record with every COLUMNS key; the numbers are plausible, not consistent."""
    workload = f"{scheme}@{round(density, 2):g}"
    tiles, vops = 16, 40 * 16
    r = dict.fromkeys(COLUMNS, 0) | {
        "key": f"W{W}L{L}ld{loaders}-{workload}-{mode}", "W": W, "L": L, "loaders": loaders, "workload": workload,
        "scheme": scheme,
        "density": density, "mode": mode, "tiles": tiles, "cycles": cycles_per_tile * tiles,
        "cycles_per_tile": cycles_per_tile, "tflops": 100 / cycles_per_tile, "vops": vops, "bubbles": round(bpv * vops),
        "bpv_measured": bpv * 1.01, "bpv_analytic": bpv, "bytes_per_tile": 512 * density + 64,
        "util_mem": 0.9, "util_tmul": 0.2 + 0.5 * (1 - density), "util_deca": 0.7, "predicted_bound": "MEM",
    }
    return r | {"system": {"platform": "spr-hbm", "bytes_per_cycle": 5.9, "batch": batch}}


def check_png(path, min_side=200):
    assert path.stat().st_size > 1000
    img = matplotlib.image.imread(path)
    assert img.ndim == 3 and min(img.shape[:2]) >= min_side


@pytest.fixture
def records():
    out = []
    for (W, L) in ((8, 4), (16, 8), (32, 8)):
        for d in (1.0, 0.4999, 0.2, 0.0501):
            out.append(rec(W, L, density=d, cycles_per_tile=20 + 300 * d / W, bpv=L / W * d))
            out.append(rec(W, L, density=d, mode="store", cycles_per_tile=50 + 300 * d / W, bpv=L / W * d))
    return out


def test_plot_bpv(records, tmp_path):
    check_png(mp.plot_bpv(records, tmp_path / "bpv.png"))
    # Store-only records are plotted rather than nothing.
    check_png(mp.plot_bpv([r for r in records if r["mode"] == "store"], tmp_path / "store.png"))


def test_plot_cycles_grid_with_missing_cell(records, tmp_path):
    # (32, 8) lacks bf8@0.2 and the invalid L > W design (8, 16) is no record: empty cells.
    kept = [r for r in records if (r["W"], r["L"], r["workload"]) != (32, 8, "bf8@0.2")] + [rec(16, 16)]
    check_png(mp.plot_cycles_grid(kept, tmp_path / "grid.png"))
    check_png(mp.plot_cycles_grid([rec()], tmp_path / "one.png"), min_side=100)


def test_plot_bord_measured(records, tmp_path):
    check_png(mp.plot_bord_measured(get_platform("spr-hbm"), records, tmp_path / "bord.png"))
    # No pipeline cycle at all: drawn on the upper edge, not lost.
    check_png(mp.plot_bord_measured(get_platform("spr-hbm"), [rec(bpv=0) | {"vops": 0}], tmp_path / "top.png"))
    with pytest.raises(ValueError, match="batch"):
        mp.plot_bord_measured(get_platform("spr-hbm"), [rec(), rec(16, 8, batch=4)], tmp_path / "mixed.png")


def test_nearest_density():
    assert mp._nearest(TABLE4, 0.4999) == 0.5
    assert mp._nearest(TABLE4, 0.0501) == 0.05
    assert mp._nearest(TABLE4, 1.0) == 1.0
    assert mp._nearest(TABLE4, 0.35) is None  # between two paper densities: no paper bar
    assert mp._nearest({}, 0.5) is None


def test_plot_utilization(records, tmp_path):
    design = [r for r in records if (r["W"], r["L"], r["mode"]) == (16, 8, "tepl")]
    check_png(mp.plot_utilization(design, TABLE4, tmp_path / "util.png"))
    check_png(mp.plot_utilization(design + [rec(16, 8, density=0.35)], {}, tmp_path / "noref.png"))


def test_plot_modes(records, tmp_path):
    check_png(mp.plot_modes(records, tmp_path / "modes.png"))
    one = [r for r in records if (r["W"], r["L"]) == (8, 4)]
    check_png(mp.plot_modes(one, tmp_path / "one.png"))
    with pytest.raises(ValueError, match="both modes"):
        mp.plot_modes([r for r in records if r["mode"] == "tepl"], tmp_path / "none.png")


# The report's tables (deca.sim.measure.report) on the same records ---------------------------------


def test_table4_rows_take_the_papers_design_and_the_largest_gap(records):
    from deca.sim.measure.report import table4_rows

    rows = table4_rows(records)
    assert {(r["W"], r["L"]) for r in rows} == {(32, 8)} and len(rows) == 4  # one design of three
    dense = next(r for r in rows if r["density"] == 1.0)
    # rec(): MEM 90%, TMUL 20%, DECA 70% against the paper's 93/18/75.
    assert (dense["mem"], dense["tmul"], dense["deca"]) == ("90% (93%)", "20% (18%)", "70% (75%)")
    assert dense["gap"] == 5


def test_modes_design_rows_and_outliers(records):
    from deca.sim.measure.records import design_rows
    from deca.sim.measure.report import bpv_outliers, modes_rows

    for row in modes_rows(records):
        by = {(r["W"], r["L"], r["workload"], r["mode"]): r for r in records}
        store, tepl = (by[row["W"], row["L"], row["workload"], m]["cycles"] for m in ("store", "tepl"))
        assert row["ratio"] == pytest.approx(store / tepl)
    rows = {(r["W"], r["L"]): r for r in design_rows(records)}
    cycles = [20 + 300 * d / 8 for d in (1.0, 0.4999, 0.2, 0.0501)]
    gmean = (cycles[0] * cycles[1] * cycles[2] * cycles[3]) ** 0.25
    assert rows[8, 4]["gmean"] == pytest.approx(gmean) and rows[32, 8]["vs_best"] == 1
    # rec() measures 1.01 x the analytic bpv: outside the tolerance only where 1% exceeds 0.02.
    assert {r["key"] for r in bpv_outliers(records)} == {r["key"] for r in records if 0.01 * r["bpv_analytic"] > 0.02}
    assert bpv_outliers([rec(bpv=3.0)]) == [] and len(bpv_outliers([rec(bpv=3.0) | {"bpv_measured": 3.2}])) == 1


def test_software_rows_against_both_software_engines():
    from deca.sim.measure.report import SOFTWARE_COLUMNS, print_summary, software_rows
    from deca.sim.model.measured import MeasuredSoftwareEngine

    # Unlimited memory: the software is VEC-bound, one tile of 512 FMAs x N per VO_tile cycles per core.
    unlimited = {"platform": "spr-hbm", "bytes_per_cycle": 1e6, "batch": 1}
    mx = rec(scheme="mxfp4") | {"system": unlimited}
    measured = MeasuredSoftwareEngine({"mxfp4": ((1.0, 50.0),)}, "test cpu", "avx512", "platform.json")
    row, = software_rows([mx], measured)
    fma_per_cycle = 512 * 56 * 2.5e9 / 1e12  # TFLOPS at one tile per cycle per core
    assert row["sw_paper"] == pytest.approx(fma_per_cycle / 100)  # the paper-derived 100 cycles of MXFP4
    assert row["sw_measured"] == pytest.approx(fma_per_cycle / 50)
    assert row["x_paper"] == pytest.approx(mx["tflops"] / row["sw_paper"])
    assert row["x_measured"] == pytest.approx(mx["tflops"] / row["sw_measured"])
    # No measured cost for sparse BF8, and no measured engine at all: the columns stay empty.
    row, = software_rows([rec(density=0.5) | {"system": unlimited}], measured)
    assert row["sw_paper"] == pytest.approx(fma_per_cycle / 71) and row["sw_measured"] is None
    assert all(r["x_measured"] is None for r in software_rows([mx], None))
    # A scheme the paper gives no software cost for (NVFP4): that column stays empty too.
    row, = software_rows([rec(scheme="nvfp4", density=0.5)], measured)
    assert row["sw_paper"] is None and row["x_paper"] is None
    lines = []
    print_summary([mx, rec(density=0.5)], None, log=lines.append)
    text = "\n".join(lines)
    assert "run 'deca baseline'" in text and all(head in text for head, _ in SOFTWARE_COLUMNS.values())


# Designs that differ in their loaders (deca sweep --loaders 2,3,4) -----------------------------------


@pytest.fixture
def loader_records():
    """W = 32, L = 8 with 2 and 3 loaders: bf8 at two densities in both modes; 3 loaders 20% faster."""
    out = []
    for loaders, speed in ((2, 1.0), (3, 1.25)):
        for d, cycles in ((1.0, 40.0), (0.0501, 30.0)):
            out += [rec(32, 8, density=d, cycles_per_tile=cycles / speed, loaders=loaders),
                    rec(32, 8, density=d, mode="store", cycles_per_tile=2 * cycles / speed, loaders=loaders)]
    return out


def test_design_rows_table4_and_modes_keep_loader_counts_apart(loader_records):
    from deca.sim.measure.records import design_rows
    from deca.sim.measure.report import modes_rows, table4_rows

    rows = {(r["W"], r["L"], r["loaders"]): r for r in design_rows(loader_records)}
    assert set(rows) == {(32, 8, 2), (32, 8, 3)}
    # Geometric means by hand: sqrt(40 * 30) with two loaders, the same over 1.25 with three.
    assert rows[32, 8, 2]["gmean"] == pytest.approx((40 * 30) ** 0.5)
    assert rows[32, 8, 3]["gmean"] == pytest.approx((40 * 30) ** 0.5 / 1.25)
    # The paper's best design is the one with its two loaders.
    assert rows[32, 8, 2]["vs_best"] == 1 and rows[32, 8, 3]["vs_best"] == pytest.approx(1.25)
    assert {r["loaders"] for r in table4_rows(loader_records)} == {2}
    three = [r for r in loader_records if r["loaders"] == 3]
    assert {(r["loaders"], r["cycles_per_tile"]) for r in table4_rows(three)} == {(3, 32.0), (3, 24.0)}
    # TEPL against store within one loader count: every ratio is the records' 2x.
    modes = modes_rows(loader_records)
    assert sorted(r["loaders"] for r in modes) == [2, 2, 3, 3]
    assert all(r["ratio"] == pytest.approx(2.0) for r in modes)


def test_summary_gets_a_loaders_column_with_several_counts(loader_records):
    from deca.sim.measure.report import SUMMARY_COLUMNS, print_summary, with_loaders

    assert list(with_loaders(SUMMARY_COLUMNS, loader_records))[:3] == ["W", "L", "loaders"]
    assert with_loaders(SUMMARY_COLUMNS, [r for r in loader_records if r["loaders"] == 3]) is SUMMARY_COLUMNS
    for records, has_column in ((loader_records, True), ([r for r in loader_records if r["loaders"] == 2], False)):
        lines = []
        print_summary(records, None, log=lines.append)
        header = lines[0].split()
        assert ("loaders" in header) == has_column
        assert ("Designs:" in "\n".join(lines)) == has_column


def test_plots_of_several_loader_counts(loader_records, tmp_path):
    assert mp.design_label((32, 8, 2)) == "W/L 32/8" and mp.design_label((32, 8, 4)) == "W/L 32/8 ld4"
    check_png(mp.plot_cycles_grid(loader_records, tmp_path / "grid.png"), min_side=100)
    check_png(mp.plot_modes(loader_records, tmp_path / "modes.png"))
    check_png(mp.plot_bpv(loader_records, tmp_path / "bpv.png"))
