"""The documentation's generated parts: result tables rendered from the records under
``docs/results/`` into the Markdown files between marker comments, and the CLI reference built from
the argparse parsers.

A results folder holds what a tool wrote (``deca run``/``deca sweep``: ``results.json`` and
``settings.json``; ``deca baseline``: ``platform.json`` and ``paths.csv``; ``deca synth``: its JSON records;
``benchmarks/bench_golden.py --json``: ``golden.json``) and ``meta.json``: the commit of the design
measured, the machine's CPU and the command that measured it, written by ``deca docs record``.

In a document, ``<!-- results:NAME -->`` ... ``<!-- /results -->`` is replaced by table NAME
(``TABLES``) and a line naming its records, commit, CPU and command.
"""

import io
import json
import os
import re
import shutil
import subprocess
from contextlib import chdir, redirect_stdout
from pathlib import Path

from deca.errors import UsageError
from deca.golden.summary import markdown_table

RESULTS = Path("docs/results")
MARKER = re.compile(r"(<!-- results:([a-z0-9-]+) -->\n)(.*?)(<!-- /results -->)", re.S)

#: The records folder each kind of measurement is kept in, the files copied from the tool's output
#: folder into it, and the command that refreshes it (run from the repository root).
KINDS = {
    "run": (("results.json", "settings.json"), "deca run --seed 1 --jobs 1 --out out/run"),
    "sweep": (("results.json", "settings.json"), "deca sweep --seed 1 --jobs 1 --out out/sweep"),
    "baseline": (("platform.json", "paths.csv"), "deca baseline --out out/baseline"),
    "golden": (("golden.json",), "python benchmarks/bench_golden.py --json out/golden/golden.json"),
    # A sweep's synth.json, or the per-design results deca synth keeps in its cache.
    "synth": (("*.json", "cache/*.json"), "deca synth --W 32 --L 8 --out out/synth"),
    # deca synth --signoff's results: OpenSTA's timing beside deca.synth.sta's.
    "signoff": (("cache/*.json",), "deca synth --W 8 --L 4 --signoff --out out/synth-w8l4"),
    "llm": (("paper.json",), "deca model llm --paper --out out/model/llm"),
    "verify": (("verify-*.json",), "deca verify --W 32 --L 8 --tiles 20000 --seed 1 --out out/verify"),
    "cluster": (("cluster.json",), "python benchmarks/bench_cluster.py --json out/cluster/cluster.json"),
    "speed": (("speed.json",), "python benchmarks/bench_marginal.py --json out/speed/speed.json"),
    "storage": (("storage.json",), "python benchmarks/bench_storage.py --json out/storage/storage.json"),
}


# Recording ----------------------------------------------------------------------------------------


def cpu_model():
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else ():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    import platform

    return platform.processor() or platform.machine() or "unknown"


def head_commit(root):
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, check=True, capture_output=True,
                              text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        raise UsageError(f"{root} is not a git checkout: give the commit measured with --commit") from None


def record(root, kind, source, commit=None, command=None):
    """Copy a tool's output files from ``source`` into ``docs/results/KIND/`` and stamp it."""
    if kind not in KINDS:
        raise UsageError(f"unknown records kind {kind!r}; choose from {', '.join(KINDS)}")
    source = Path(source)
    patterns, default_command = KINDS[kind]
    files = [p for pattern in patterns for p in sorted(source.glob(pattern)) if p.name != "meta.json"]
    missing = [p for p in patterns if "*" not in p and not (source / p).is_file()]
    if missing or not files:
        raise UsageError(f"{source} lacks {', '.join(missing or patterns)}: is it the output folder of "
                         f"'{default_command}'?")
    dest = root / RESULTS / kind
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for path in files:
        shutil.copyfile(path, dest / path.name)
    meta = {"commit": commit or head_commit(root), "cpu": cpu_model(),
            "command": command or _tool_command(dest, kind) or default_command}
    (dest / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return dest


def _tool_command(folder, kind):
    """The command a tool wrote into its own records, when it does."""
    if kind == "baseline":
        return json.loads((folder / "platform.json").read_text()).get("command")
    if kind in ("golden", "cluster", "speed", "storage"):
        return json.loads((folder / f"{kind}.json").read_text()).get("command")
    if kind == "verify":
        return "; ".join(json.loads(p.read_text())["command"] for p in sorted(folder.glob("verify-*.json")))
    return None


# Rendering ----------------------------------------------------------------------------------------


class Records:
    """The records folders of one checkout, read on demand."""

    def __init__(self, root):
        self.root = Path(root)

    def folder(self, kind):
        return self.root / RESULTS / kind

    def meta(self, kind):
        """The folder's stamp; None when its files were committed without one."""
        path = self.folder(kind) / "meta.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def recorded(self, kind):
        """Whether the folder holds records (a stamp or a tool's files)."""
        folder = self.folder(kind)
        return folder.is_dir() and any(p.is_file() for p in folder.iterdir())

    def json(self, kind, name):
        path = self.folder(kind) / name
        if not path.is_file():
            raise UsageError(f"{path} is missing: record it with 'deca docs record {kind} FOLDER'")
        return json.loads(path.read_text())

    def measurements(self, kind):
        return self.json(kind, "results.json")

    def synth_results(self, kind="synth"):
        """Every synthesized design in ``docs/results/KIND/``: a ``deca synth --sweep`` JSON (its
        ``results``) or one result per file; the last file wins for a design found twice."""
        from deca.synth.flow import SynthResult

        found = {}
        for path in sorted(self.folder(kind).glob("*.json")):
            if path.name == "meta.json":
                continue
            doc = json.loads(path.read_text())
            for d in doc.get("results", [doc]) if isinstance(doc, dict) else doc:
                if isinstance(d, dict) and "total" in d and "blocks" in d:
                    r = SynthResult.from_dict(d)
                    found[(r.W, r.L, r.loaders, r.design, r.tech)] = r
        return [found[k] for k in sorted(found, key=lambda k: tuple(str(v) for v in k))]


def provenance(records, kind, command=None):
    meta = records.meta(kind)
    if meta is None:
        return (f"*Records: `{RESULTS / kind}/`, without `meta.json`: the commit and the machine they were measured "
                f"on are not recorded (`deca docs record {kind} FOLDER` stamps them).*")
    return (f"*Records: `{RESULTS / kind}/`, measured on commit `{meta['commit']}` on {meta['cpu']}; "
            f"reproduce with `{command or meta['command']}`, then `deca docs record {kind} FOLDER` and "
            "`deca docs render`.*")



def _drop(columns, *keys):
    return {k: v for k, v in columns.items() if k not in keys}


def table_run(records):
    from deca.sim.measure.report import SUMMARY_COLUMNS, summary_rows

    recs = records.measurements("run")
    return markdown_table(summary_rows(recs), _drop(SUMMARY_COLUMNS, "W", "L", "tiles")), "run"


def table_table4(records):
    from deca.sim.measure.report import TABLE4_COLUMNS, table4_rows

    return markdown_table(table4_rows(records.measurements("run")), TABLE4_COLUMNS), "run"


def table_modes(records):
    from deca.sim.measure.report import MODES_COLUMNS, modes_rows

    return markdown_table(modes_rows(records.measurements("run")), _drop(MODES_COLUMNS, "W", "L")), "run"


def table_software(records):
    from deca.sim.measure.report import SOFTWARE_COLUMNS, software_rows
    from deca.sim.model.measured import measured_engine

    platform = records.folder("baseline") / "platform.json"
    measured = measured_engine(platform) if platform.is_file() else None
    rows = [r for r in software_rows(records.measurements("run"), measured) if r["mode"] == "tepl"]
    text = markdown_table(rows, _drop(SOFTWARE_COLUMNS, "W", "L", "mode"))
    if measured is None:
        return text + "\n\n*SW measured: no `deca baseline` records yet.*", "run"
    return (text + f"\n\nSW measured: {measured.machine}, {measured.path} path. "
            + provenance(records, "baseline")), "run"


def _grid_note(records, kind):
    """What a campaign's records cover: designs, workloads, modes, tiles per point."""
    recs = records.measurements(kind)
    designs = sorted({(r["W"], r["L"], r["loaders"]) for r in recs})
    workloads = list(dict.fromkeys(r["workload"] for r in recs))
    modes = sorted({r["mode"] for r in recs})
    names = ", ".join(f"{W}/{L}" + ("" if n == 2 else f" ({n} loaders)") for W, L, n in designs)
    return (f"{len(recs)} points: {len(designs)} designs (W/L {names}) x {len(workloads)} workloads "
            f"({', '.join(workloads)}), {', '.join(modes)} mode, {recs[0]['tiles']} tiles per point.")


def table_sweep(records):
    from deca.sim.measure.records import design_rows
    from deca.sim.measure.report import DESIGN_COLUMNS, with_loaders

    recs = records.measurements("sweep")
    return _grid_note(records, "sweep") + "\n\n" + markdown_table(design_rows(recs), with_loaders(DESIGN_COLUMNS, recs)), "sweep"


def table_sweep_grid(records):
    """Cycles per tile, one row per design, one column per workload."""
    recs = [r for r in records.measurements("sweep") if r["mode"] == "tepl"]
    workloads = list(dict.fromkeys(r["workload"] for r in recs))
    designs = sorted({(r["W"], r["L"], r["loaders"]) for r in recs})
    by = {((r["W"], r["L"], r["loaders"]), r["workload"]): r["cycles_per_tile"] for r in recs}
    loaders = len({d[2] for d in designs}) > 1
    head = ["W", "L", *(["loaders"] if loaders else []), *workloads]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d in designs:
        cells = [str(d[0]), str(d[1]), *([str(d[2])] if loaders else []),
                 *(f"{by[d, w]:.1f}" if (d, w) in by else "-" for w in workloads)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), "sweep"


def table_bpv(records):
    from deca.sim.measure.report import bpv_outliers

    rows = []
    for kind in ("run", "sweep"):
        recs = records.measurements(kind)
        worst = max(recs, key=lambda r: abs(r["bpv_measured"] - r["bpv_analytic"]))
        rows.append(f"| `deca {kind}` | {len(recs)} | {len(recs) - len(bpv_outliers(recs))} | {worst['key']}: "
                    f"{worst['bpv_measured']:.3f} against {worst['bpv_analytic']:.3f} |")
    head = "| campaign | points | bpv within max(3%, 0.02) of the closed form | largest gap |\n|---|---|---|---|"
    return head + "\n" + "\n".join(rows) + "\n\n" + provenance(records, "run"), "sweep"


def table_baseline(records):
    doc = records.json("baseline", "platform.json")
    rows = [{"workload": f"{w['scheme']}@{w['density']:g}", "class": w.get("class", ""),
             "bytes": w["bytes_per_tile"], "l2": w["l2_cycles_per_tile"]["median"],
             "l2_min": w["l2_cycles_per_tile"]["min"], "dram": w["dram_cycles_per_tile"]["median"],
             "dram_min": w["dram_cycles_per_tile"]["min"], "slow": w["slow_tiles_per_pass"]}
            for w in doc["workloads"]]
    la = doc["load_average"]
    text = markdown_table(rows, {"workload": ("workload", "{}"), "bytes": ("B/tile", "{:.0f}"),
                      "l2": ("L2 median", "{:.1f}"), "l2_min": ("L2 min", "{:.1f}"),
                      "dram": ("DRAM median", "{:.1f}"), "dram_min": ("DRAM min", "{:.1f}"),
                      "slow": ("slow-path tiles per pass", "{}")})
    note = (f"Core cycles per 16 x 32 tile to BF16, **{doc['path']} path** (the fastest of the paths this CPU runs: "
            f"{', '.join(doc.get('paths', [doc['path']]))}), core ~{doc['core_ghz']:.2f} GHz "
            f"(estimated), TSC {doc['tsc_ghz']:.2f} GHz; streaming read bandwidth "
            f"{doc['stream_bytes_per_cycle']:.2f} bytes per core cycle; load average {la['before'][0]:.1f} before, "
            f"{la['after'][0]:.1f} after, on {doc['machine']['cpus_online']} CPUs.")
    return note + "\n\n" + text, "baseline"


def table_baseline_paths(records):
    """Every path the recorded CPU runs: L2 median cycles per tile and the speed-up over the scalar loop."""
    doc = records.json("baseline", "platform.json")
    paths = doc.get("paths", [doc["path"]])
    head = ["workload", *(f"{p} L2 median" for p in paths), *(f"{p} vs scalar" for p in paths if p != "scalar")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w in doc["workloads"]:
        by = w.get("paths", {doc["path"]: {"l2_cycles_per_tile": w["l2_cycles_per_tile"]}})
        cells = [f"{w['scheme']}@{w['density']:g}", *(f"{by[p]['l2_cycles_per_tile']['median']:.1f}" for p in paths),
                 *(f"{by[p]['speedup_over_scalar']:.1f}x" for p in paths if p != "scalar")]
        lines.append("| " + " | ".join(cells) + " |")
    features = doc["machine"].get("cpu_features")
    note = (f"Core cycles per tile of every path, L2, medians over the timed calls of one run (the paths taking "
            f"turns); CPU features found: {', '.join(features) if features else 'not recorded'}.")
    return note + "\n\n" + "\n".join(lines), "baseline"


#: The workloads of the README's line on the software baseline (the issue's headline set).
HEADLINE_BASELINE = (("mxfp4", 1.0), ("bf8", 1.0), ("bf8", 0.5), ("bf8", 0.2), ("bf8", 0.05), ("bf16", 0.5),
                     ("bf16", 0.05))


def table_baseline_headline(records):
    """The README's short table: the scalar loop against every vector path on the headline workloads."""
    doc = records.json("baseline", "platform.json")
    fast = [p for p in doc.get("paths", [doc["path"]]) if p != "scalar"]
    by = {(w["scheme"], w["density"]): w.get("paths", {}) for w in doc["workloads"]}
    head = ["", *(f"{s.upper()}" + ("" if d == 1 else f" {d:g}") for s, d in HEADLINE_BASELINE if (s, d) in by)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in ["scalar", *fast]:
        cells = [f"{p} (cycles per tile)"]
        for key in HEADLINE_BASELINE:
            if key in by and p in by[key]:
                m = by[key][p]
                speed = "" if p == "scalar" else f" ({m['speedup_over_scalar']:.1f}x)"
                cells.append(f"{m['l2_cycles_per_tile']['median']:.0f}{speed}")
            elif key in by:
                cells.append("-")
        lines.append("| " + " | ".join(cells) + " |")
    note = (f"On {doc['machine']['cpu']} (pinned core ~{doc['core_ghz']:.2f} GHz): L2 medians in core cycles per "
            "16 x 32 tile to BF16, each vector path's speed-up over the scalar loop in brackets.")
    return note + "\n\n" + "\n".join(lines), "baseline"


def table_golden(records):
    doc = records.json("golden", "golden.json")
    rows = doc["rows"]
    note = (f"`compress` and `decompress` of a {doc['shape'][0]} x {doc['shape'][1]} float32 matrix, median of "
            f"{doc['repeat']} runs, CPU seconds of one process (seed {doc['seed']}).")
    return note + "\n\n" + markdown_table(rows, {
        "scheme": ("scheme", "{}"), "density": ("density", "{:g}"),
        "compress_cpu_s": ("compress CPU s", "{:.3f}"), "compress_mws": ("compress M weights/s", "{:.0f}"),
        "decompress_cpu_s": ("decompress CPU s", "{:.3f}"), "decompress_mws": ("decompress M weights/s", "{:.0f}"),
    }), "golden"


def table_golden_summary(records):
    rows = records.json("golden", "golden.json")["rows"]
    comp = [r["compress_mws"] for r in rows]
    dec = [r["decompress_mws"] for r in rows]
    text = ("| tool | what | speed |\n|---|---|---|\n"
            f"| golden `compress` | {len(rows)} scheme and density cases | {min(comp):.0f} to {max(comp):.0f} "
            "M weights per CPU second |\n"
            f"| golden `decompress` | the same | {min(dec):.0f} to {max(dec):.0f} M weights per CPU second |")
    return text, "golden"


def _printed(argv, root):
    """What ``deca ARGV`` prints when run in ``root`` (paths in it stay relative), as a text block."""
    from deca.cli import build_parser

    args = build_parser().parse_args(argv)
    out = io.StringIO()
    with redirect_stdout(out), chdir(root):
        args.func(args)
    return "```text\n" + out.getvalue().rstrip() + "\n```"


def table_model(records):
    """What `deca model table` prints with the recorded software baseline."""
    return _printed(["model", "table", "--baseline", str(RESULTS / "baseline" / "platform.json")], records.root), \
        "baseline"


def table_model_paper(records):
    """The model's Table 2 alone: computed, not measured, so no records."""
    return _printed(["model", "table", "--baseline", "none"], records.root), None


_SYNTH_DESIGN = {
    "W": ("W", "{}"), "L": ("L", "{}"), "loaders": ("loaders", "{}"), "area": ("area µm²", "{:,.0f}"),
    "area56": ("x 56, mm²", "{:.2f}"), "flip_flops": ("flip-flops", "{:,}"), "macros": ("macros", "{}"),
    "critical": ("critical path ps", "{:.0f}"), "fmax": ("fmax GHz", "{:.2f}"), "power": ("power mW", "{:.1f}"),
}


def _synth_asic(records):
    results = [r for r in records.synth_results() if r.tech != "generic" and r.timing]
    if not results:
        raise UsageError(f"no standard-cell 'deca synth' records in {records.folder('synth')}")
    return results


def table_synth(records):
    rows = [{"W": r.W, "L": r.L, "loaders": r.loaders, "area": r.total.area, "area56": r.total.area * 56 / 1e6,
             "flip_flops": r.total.flip_flops, "macros": r.total.macros, "critical": r.timing["critical_ps"],
             "fmax": r.timing["fmax_ghz"], "power": r.total.power_mw} for r in _synth_asic(records)]
    return markdown_table(rows, _SYNTH_DESIGN), "synth"


_SIGNOFF = {
    "design": ("design", "{}"), "ours": ("ours: reg. to reg. ps", "{:.1f}"), "sta": ("OpenSTA ps", "{:.1f}"),
    "diff": ("OpenSTA - ours", "{:+.2%}"), "io": ("I/O ps, ours / OpenSTA", "{}"),
    "wns": ("WNS ps", "{:.1f}"), "tns": ("TNS ps", "{:,.1f}"), "path": ("worst path, OpenSTA / ours", "{}"),
}


def table_synth_signoff(records):
    """``deca synth --signoff``: OpenSTA's worst paths beside deca.synth.sta's."""
    results = [r for r in records.synth_results("signoff") if r.signoff]
    if not results:
        raise UsageError(f"no 'deca synth --signoff' records in {records.folder('signoff')}")
    rows = []
    for r in results:
        s, t = r.signoff, r.timing
        clk = s["groups"][s["clock"]]
        rows.append({"design": f"{r.design} W={r.W} L={r.L} ({r.loaders} loaders)", "ours": t["critical_ps"],
                     "sta": s["critical_ps"], "diff": s["critical_diff"],
                     "io": f"{t['io_ps']:.1f} / {s['io_ps']:.1f}", "wns": s["wns_ps"], "tns": s["tns_ps"],
                     "path": f"`{clk['start']}` to `{clk['end']}` / `{t['path'][0]['net']}` to "
                             f"`{t['path'][-1]['net']}`"})
    return markdown_table(rows, _SIGNOFF), "signoff"


def table_synth_blocks(records):
    """Area and power of each block of the paper, per design."""
    from deca.synth.blocks import BLOCK_NAMES

    results = _synth_asic(records)
    names = [b for b in BLOCK_NAMES if any(b in r.blocks for r in results)]
    head = ["W", "L", "loaders", *names, "whole PE"]
    lines = ["Area in µm² and power in mW of each block.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        cell = lambda s: f"{s.area:,.0f} µm², {s.power_mw:.1f} mW" if s.power_mw is not None else f"{s.area:,.0f} µm²"  # noqa: E731
        lines.append("| " + " | ".join([str(r.W), str(r.L), str(r.loaders),
                                        *(cell(r.blocks[b]) if b in r.blocks else "-" for b in names),
                                        cell(r.total)]) + " |")
    return "\n".join(lines), "synth"


def table_synth_paper(records):
    """The paper's W = 32, L = 8 design against section 7.4: 56 PEs' area and power, clock, area split."""
    from deca.synth.blocks import PAPER_AREA_MM2, PAPER_GHZ, PAPER_PES, PAPER_POINT, PAPER_POWER_W, PAPER_SPLIT
    from deca.synth.report import paper_split

    r = next((r for r in _synth_asic(records) if (r.W, r.L) == PAPER_POINT and r.design == "pe"), None)
    if r is None:
        raise UsageError(f"no 'deca synth' record of the W = {PAPER_POINT[0]}, L = {PAPER_POINT[1]} PE in "
                         f"{records.folder('synth')}")
    shares = paper_split(r)
    power = "-" if r.total.power_mw is None else f"{r.total.power_mw * PAPER_PES / 1e3:.2f} W"
    if r.power:  # the activity the power comes from: vectorless or a simulated workload
        power += f" ({r.power['activity']})"
    lines = [f"| W = {PAPER_POINT[0]}, L = {PAPER_POINT[1]}, {r.loaders} loaders | this PE (ASAP7) | paper (7 nm) |",
             "|---|---|---|",
             f"| area of {PAPER_PES} PEs | {r.total.area * PAPER_PES / 1e6:.2f} mm² | {PAPER_AREA_MM2} mm² |",
             f"| power of {PAPER_PES} PEs at {PAPER_GHZ} GHz | {power} | {PAPER_POWER_W} W |",
             f"| clock | {r.timing['fmax_ghz']:.2f} GHz ({r.timing['critical_ps']:.0f} ps) | {PAPER_GHZ} GHz |",
             *(f"| area share: {g} | {shares[g]:.0%} | {PAPER_SPLIT[g]:.0%} |" for g in PAPER_SPLIT)]
    return "\n".join(lines), "synth"


def table_synth_power(records):
    """Clock gates and power at 2.5 GHz (mW, leakage and dynamic) of each standard-cell design:
    vectorless, each ``--activity`` workload's and the per-block maximum of the workloads."""
    results = _synth_asic(records)
    workloads = list(dict.fromkeys(w["workload"].split()[0] for r in results
                                   for w in r.power.get("workloads", ())))
    head = ["W", "L", "loaders", "clock gates (flip-flops)", "dropped for timing (flip-flops)", "vectorless mW",
            *(f"{w} mW" for w in workloads), "maximum per block mW"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        p = r.power
        mw = {w["workload"].split()[0]: sum(w["blocks_mw"].values()) for w in p.get("workloads", ())}
        highest = {}
        for w in p.get("workloads", ()):
            for b, v in w["blocks_mw"].items():
                highest[b] = max(highest.get(b, 0.0), v)
        vectorless = sum(s.leakage_mw + s.vectorless_dynamic_mw for s in r.blocks.values())
        lines.append("| " + " | ".join([
            str(r.W), str(r.L), str(r.loaders), f"{p.get('clock_gates', 0):,} ({p.get('gated_flops', 0):,})",
            f"{p.get('gates_dropped', 0):,} ({p.get('flops_ungated', 0):,})" if "gates_dropped" in p else "-",
            f"{vectorless:.1f}", *(f"{mw[w]:.1f}" if w in mw else "-" for w in workloads),
            f"{sum(highest.values()):.1f}" if highest else "-"]) + " |")
    return "\n".join(lines), "synth"


def _verify_runs(records, mutants):
    runs = [json.loads(p.read_text()) for p in sorted(records.folder("verify").glob("verify-*.json"))]
    return [r for r in runs if bool(r.get("mutant")) == mutants]


def table_verify(records):
    """``deca verify`` runs: requests checked, failures, speed, coverage."""
    rows = [{**r, "design": f"W{r['W']} L{r['L']}, {r['loaders']} loaders", "malformed": r["errors"],
             "per_cpu_minute": 60 * r["requests"] / r["cpu_seconds"], "cycles_per_cpu_s": r["cycles"] / r["cpu_seconds"],
             "coverage": f"{r['coverage']['hit']} of {r['coverage']['total']} ({r['coverage']['percent']:.1f}%)"}
            for r in _verify_runs(records, False)]
    return markdown_table(rows, {
        "design": ("design", "{}"), "seed": ("seed", "{}"), "requests": ("requests", "{:,}"),
        "malformed": ("of them malformed", "{:,}"), "mismatches": ("mismatches", "{}"), "hangs": ("hangs", "{}"),
        "cycles": ("cycles", "{:,}"), "cpu_seconds": ("CPU s", "{:.0f}"),
        "per_cpu_minute": ("requests per CPU minute", "{:,.0f}"), "cycles_per_cpu_s": ("cycles per CPU s", "{:,.0f}"),
        "coverage": ("coverage bins hit", "{}"),
    }), "verify"


def table_verify_mutants(records):
    """``deca verify --mutant`` runs: the request that killed each mutant."""
    from deca.sim.verify.mutants import MUTANTS

    rows = []
    for r in _verify_runs(records, True):
        first = min(r["failures"], key=lambda f: f["tile"]) if r["failures"] else None
        rows.append({"mutant": r["mutant"], "fault": MUTANTS[r["mutant"]][3] if r["mutant"] in MUTANTS else "",
                     "design": f"W{r['W']} L{r['L']}", "seed": r["seed"],
                     "killed": f"{first['tile'] + 1:,} ({first['kind']})" if first else "survived"})
    return markdown_table(rows, {"mutant": ("mutant", "{}"), "fault": ("fault", "{}"), "design": ("design", "{}"),
                      "seed": ("seed", "{}"), "killed": ("requests to kill", "{}")}), "verify"


def table_cluster(records):
    """``benchmarks/bench_cluster.py``: the sweep on a LocalCluster against ``--jobs 1``, with a worker killed."""
    r = records.json("cluster", "cluster.json")["sweep"]
    same = {None: "identical, every field"}
    rows = [{"run": "`--jobs 1`", "wall": f"{r['wall_jobs1']:.0f}", "records": f"{r['points']}", "vs": "(the reference)"},
            {"run": "`--cluster local:2`", "wall": f"{r['wall_cluster2']:.0f}", "records": f"{r['points']}",
             "vs": same.get(r["cluster_differs"], r["cluster_differs"])},
            {"run": f"`--cluster` (2 workers), one worker process killed mid-point: {r['killed_rerun']} task(s) rerun",
             "wall": "", "records": f"{r['killed_points']}", "vs": same.get(r["killed_differs"], r["killed_differs"])}]
    return markdown_table(rows, {"run": ("run", "{}"), "wall": ("wall s", "{}"), "records": ("records", "{}"),
                      "vs": ("records against --jobs 1", "{}")}), "cluster"


def table_cluster_synth(records):
    """``benchmarks/bench_cluster.py``: a synthesis sweep's wall time, measured on 2 workers and
    modelled on more: the fixed part measured (the --jobs 2 wall time less its designs' schedule)
    plus the designs' schedule on n workers."""
    r = records.json("cluster", "cluster.json")["synth"]
    fixed = r["wall_jobs2"] - r["modelled"]["2"]["wall"]
    same = "identical but the Yosys seconds" if not any(r["cluster_differs"]) else f"differ: {r['cluster_differs']}"
    rows = [{"workers": "2, `--jobs 2`", "wall": f"{r['wall_jobs2']:.0f} measured",
             "note": f"designs {r['modelled']['2']['wall']:.0f} s scheduled, the rest {fixed:.0f} s"},
            {"workers": "2, `--cluster local:2`", "wall": f"{r['wall_cluster2']:.0f} measured", "note": f"results {same}"}]
    rows += [{"workers": n, "wall": f"{fixed + m['wall']:.0f} modelled",
              "note": f"designs {m['wall']:.0f} s: longest design {m['longest']:.0f} s, total / workers "
                      f"{m['total_over_n']:.0f} s"}
             for n, m in r["modelled"].items() if n != "2"]
    return markdown_table(rows, {"workers": ("workers", "{}"), "wall": ("wall s", "{}"), "note": ("", "{}")}), "cluster"


def table_speed(records):
    """``benchmarks/bench_marginal.py``: the marginal speed of whole commands, and the C++ loop's."""
    r = records.json("speed", "speed.json")
    small, large = r["tiles"]
    rows = []
    for name, c in r["commands"].items():
        cpu = {t: c["cpu_median_seconds"][str(t)] for t in (small, large)}
        rows.append({"command": f"`{c['command']}`", "small": f"{c['cycles'][str(small)]:,} in {cpu[small]:.1f}",
                     "large": f"{c['cycles'][str(large)]:,} in {cpu[large]:.1f}",
                     "marginal": f"{c['marginal_cycles_per_cpu_s']:,.0f}"})
    rows.append({"command": f"the fast engine's C++ loop alone (the sweep point, {large:,} tiles)", "small": "",
                 "large": "", "marginal": f"{r['loop_cycles_per_cpu_s']:,.0f}"})
    return markdown_table(rows, {"command": (f"W = {r['W']}, L = {r['L']}", "{}"),
                                 "small": (f"{small:,} tiles: cycles in CPU s", "{}"),
                                 "large": (f"{large:,} tiles: cycles in CPU s", "{}"),
                                 "marginal": ("cycles per CPU s: marginal (the loop: its own)", "{}")}), "speed"


STORAGE_KNOBS = {"contexts": "tile contexts per loader", "tags": "tags per loader", "sqq_bytes": "SQQ bytes per loader",
                 "tout_buffers": "TOut buffers"}


def table_storage(records):
    """``benchmarks/bench_storage.py``: per candidate size of the PE's storage, its bits and flip-flops
    and the cycles per tile of every ``deca run`` workload (TEPL), against the reference sizes."""
    r = records.json("storage", "storage.json")
    workloads = [k.removesuffix("-tepl") for k in r["rows"][0]["cycles"] if k.endswith("-tepl")]
    rows = []
    for row in r["rows"]:
        change = ", ".join(f"{STORAGE_KNOBS[k]} {v}" for k, v in row["change"].items())
        flops = row["flip_flops"]
        rows.append({"change": (change or "reference: " + ", ".join(f"{STORAGE_KNOBS[k]} {v}"
                                                                    for k, v in r["reference"].items()))
                     + (" (**the defaults**)" if row["defaults"] else ""),
                     "kbit": f"{row['bits'] / 1024:.1f}", "ff": f"{flops['contexts'] + flops['tout']:,}",
                     **{w: f"{row['cycles'][w + '-tepl']:.1f}" for w in workloads},
                     "slowest": f"{100 * row['slowest']:+.1f}%", "passes": "yes" if row["passes"] else "no"})
    columns = {"change": ("sizes (the reference's but)", "{}"), "kbit": ("Kbit held", "{}"),
               "ff": ("flip-flops: contexts + TOut", "{}"),
               **{w: (f"{w}: TEPL cycles per tile", "{}") for w in workloads},
               "slowest": ("slowest point vs reference", "{}"), "passes": ("keeps the targets", "{}")}
    return markdown_table(rows, columns), "storage"


def _llm_table(key):
    """Table KEY of the recorded reproduction of the paper's section 8.4 (``deca model llm --paper``)."""
    def table(records):
        from deca.sim.model.llm_report import paper_tables, verdicts

        rec = records.json("llm", "paper.json")
        if key == "verdicts":
            return "\n".join(f"- {line}" for line in verdicts(rec)), "llm"
        _, rows, columns = paper_tables(rec)[key]
        return markdown_table(rows, columns), "llm"
    return table


#: Table name -> (function(Records) returning (Markdown, the records kind it comes from), that kind).
TABLES = {
    "run": (table_run, "run"), "table4": (table_table4, "run"), "modes": (table_modes, "run"),
    "software": (table_software, "run"), "sweep": (table_sweep, "sweep"), "sweep-grid": (table_sweep_grid, "sweep"),
    "bpv": (table_bpv, "sweep"), "baseline": (table_baseline, "baseline"),
    "baseline-paths": (table_baseline_paths, "baseline"), "baseline-headline": (table_baseline_headline, "baseline"),
    "golden": (table_golden, "golden"),
    "golden-summary": (table_golden_summary, "golden"), "model-table": (table_model, "baseline"),
    "model-table2": (table_model_paper, None),
    "synth": (table_synth, "synth"), "synth-blocks": (table_synth_blocks, "synth"),
    "synth-paper": (table_synth_paper, "synth"), "synth-power": (table_synth_power, "synth"),
    "synth-signoff": (table_synth_signoff, "signoff"),
    "verify": (table_verify, "verify"),
    "verify-mutants": (table_verify_mutants, "verify"), "cluster": (table_cluster, "cluster"),
    "cluster-synth": (table_cluster_synth, "cluster"), "speed": (table_speed, "speed"),
    "storage": (table_storage, "storage"),
    **{f"llm-{key}": (_llm_table(key), "llm") for key in ("table1", "table6", "speedups", "table7", "fig17", "verdicts")},
}


def render_table(records, name):
    if name not in TABLES:
        raise UsageError(f"unknown results table {name!r}; known: {', '.join(TABLES)}")
    fn, kind = TABLES[name]
    if kind is None:
        return f"{fn(records)[0]}\n\n*Computed by the model, not measured: `deca docs render` runs it again.*\n"
    if not records.recorded(kind):
        return (f"*No records in `{RESULTS / kind}/` yet: measure with `{KINDS[kind][1]}`, then "
                f"`deca docs record {kind} FOLDER` and `deca docs render`.*\n")
    text, kind = fn(records)
    return f"{text}\n\n{provenance(records, kind)}\n"


def documents(root):
    """The Markdown files that may hold result tables: README.md and every page under docs/."""
    root = Path(root)
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def render_text(text, records):
    return MARKER.sub(lambda m: m.group(1) + render_table(records, m.group(2)) + m.group(4), text)


def render(root, check=False):
    """Fill every marker of every document; with ``check``, change nothing and return the documents
    whose tables differ from their records."""
    records = Records(root)
    stale = []
    for path in documents(root):
        text = path.read_text()
        new = render_text(text, records)
        if new != text:
            stale.append(path)
            if not check:
                path.write_text(new)
    return stale


# The CLI reference ---------------------------------------------------------------------------------


def subparsers(parser, prefix=()):
    """(command words, parser) of every subcommand, depth first, in the order they were added."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name), sub
                yield from subparsers(sub, (*prefix, name))


def options(parser):
    """The option strings of a parser (--W, -o, ...)."""
    return {s for action in parser._actions for s in action.option_strings}


def cli_reference():
    """Markdown of every ``deca`` command's ``--help``, at a fixed width."""
    from deca.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        parser = build_parser()
        parts = ["# CLI reference", "",
                 "Every `deca` command with its `--help`, generated from the parsers when the site is built.", "",
                 "```text", parser.format_help().rstrip(), "```"]
        for words, sub in subparsers(parser):
            parts += ["", f"{'#' * (1 + len(words))} deca {' '.join(words)}", "", "```text",
                      sub.format_help().rstrip(), "```"]
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(parts) + "\n"


def architecture_page():
    return (Path(__file__).resolve().parent.parent / "ARCHITECTURE.md").read_text()


#: Pages of the site made when it is built (scripts/mkdocs_hooks.py), so they cannot disagree with
#: their source: page name -> function returning its Markdown.
GENERATED_PAGES = {"cli.md": cli_reference, "architecture.md": architecture_page}


# The command -------------------------------------------------------------------------------------


def add_docs_parser(sub):
    d = sub.add_parser("docs", help="render the documentation's result tables from docs/results/, or record a "
                                    "measurement there")
    dsub = d.add_subparsers(dest="docs_command", required=True, metavar="ACTION")
    r = dsub.add_parser("render", help="fill every results table of README.md and docs/ from docs/results/")
    r.add_argument("--check", action="store_true", help="change nothing; exit 1 if a document's table differs "
                                                        "from its records")
    r.add_argument("--root", type=Path, default=Path("."), help="repository root (default: the current folder)")
    r.set_defaults(func=cmd_render)
    c = dsub.add_parser("record", help="copy a tool's output folder into docs/results/KIND/ with the commit and CPU")
    c.add_argument("kind", choices=list(KINDS), help="which measurement: " + ", ".join(KINDS))
    c.add_argument("folder", type=Path, help="the tool's output folder (e.g. out/run)")
    c.add_argument("--commit", help="commit of the design measured (default: git rev-parse --short HEAD)")
    c.add_argument("--command", help="the command that measured it (default: the one the tool wrote, or the "
                                     "kind's usual command)")
    c.add_argument("--root", type=Path, default=Path("."), help="repository root (default: the current folder)")
    c.set_defaults(func=cmd_record)


def _root(path):
    if not (path / "mkdocs.yml").is_file():
        raise UsageError(f"{path.resolve()} is not the repository root (no mkdocs.yml): run from there or give --root")
    return path


def cmd_render(args):
    root = _root(args.root)
    stale = render(root, check=args.check)
    names = ", ".join(str(p.relative_to(root)) for p in stale)
    if args.check:
        if stale:
            print(f"tables differ from their records in: {names} (run 'deca docs render')")
            raise SystemExit(1)
        print("every results table matches its records")
    else:
        print(f"rendered: {names}" if stale else "every results table was already up to date")


def cmd_record(args):
    dest = record(_root(args.root), args.kind, args.folder, args.commit, args.command)
    print(f"recorded {args.folder} in {dest} (meta.json: commit, CPU, command); now run 'deca docs render'")

