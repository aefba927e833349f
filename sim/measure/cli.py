"""``deca run`` (the main job: one design, the default workloads, both invocation modes) and
``deca sweep`` (a W x L x loaders x workload grid), measured on the RTL with the core and memory models.

Building the parsers imports no simulator: the commands import the campaign machinery when they run."""

import argparse
import hashlib
import shlex
import sys
from pathlib import Path

from deca.args import add_storage_arguments, number_list, storage
from deca.errors import UsageError
from deca.golden import SCHEMES, load
from deca.hw.params import LOADER_CHOICES, LOADERS, loader_counts
from deca.hw.registers import PREFETCH_DEGREE
from deca.sim.bench.cores import LINK_LATENCY, MODES, TEPL_QUEUE
from deca.sim.bench.system import HIT_LATENCY, MISS_LATENCY, system
from deca.sim.model.platform import PRESETS
from deca.toolchain import SIMULATORS

#: ``deca run``'s workloads: Q8 at the paper's Table 4 densities, dense MXFP4 and half-pruned BF16.
RUN_WORKLOADS = ("bf8@1", "bf8@0.5", "bf8@0.2", "bf8@0.05", "mxfp4@1", "bf16@0.5")
SWEEP_W, SWEEP_L = (8, 16, 32, 64), (4, 8, 16, 32, 64)
SWEEP_SCHEMES, SWEEP_DENSITIES = ("bf8", "mxfp4", "bf16"), (1.0, 0.5, 0.2, 0.05)
#: Why the measured utilizations can differ from the paper's Table 4 (docs/measuring.md).
TABLE4_NOTE = (
    "Where the measured utilizations differ from the paper's: at low density a tile needs few vOps and "
    "90 bytes, and the loaders bound the rate. Each loader holds two tiles (its tile contexts), so the "
    "next tile's mask and values come from L2 while the previous one is in the pipeline; a context keeps "
    "its TEPL until its tile has left its queues (about 48 cycles at 5% density), and TOut streams the "
    "completion rows on its own. With --loaders 3 or 4 a prefetch degree of 5 tiles (the paper's) no "
    "longer covers the memory latency (--prefetch-degree). The paper's DECA utilization evidently counts more than "
    "the dequantization stage's cycles, which is ours: (vOps + bubbles) / cycles.")


def _range(text):
    try:
        lo, _, hi = text.partition("-")
        return int(lo), int(hi or lo)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a latency looks like 100 or 100-140 (cycles), got {text!r}") from None


def _add_system(p, modes, sweep=False):
    g = p.add_argument_group("system (core and memory around the PE)")
    g.add_argument("--platform", default="spr-hbm", help=f"preset ({', '.join(PRESETS)}) or a name in --platforms; "
                   "each core gets 1/cores of its memory bandwidth")
    g.add_argument("--platforms", type=Path, metavar="TOML", help="TOML file of user platforms (see deca.sim.model.platform)")
    g.add_argument("--bandwidth", type=float, metavar="B_PER_CYCLE", help="override the per-core memory bandwidth")
    g.add_argument("--miss-latency", type=_range, default=MISS_LATENCY, metavar="LO-HI",
                   help=f"memory latency in cycles (default {MISS_LATENCY[0]}-{MISS_LATENCY[1]})")
    g.add_argument("--hit-latency", type=_range, default=HIT_LATENCY, metavar="LO-HI",
                   help=f"L2 hit latency in cycles (default {HIT_LATENCY[0]}-{HIT_LATENCY[1]})")
    g.add_argument("--link-latency", type=int, default=LINK_LATENCY,
                   help=f"core-DECA latency each way in cycles (default {LINK_LATENCY})")
    g.add_argument("--tepl-queue", type=int, default=TEPL_QUEUE, help=f"TEPL queue entries (default {TEPL_QUEUE})")
    g.add_argument("--batch", type=int, default=1, help="batch N, 1..16 (default 1)")
    g.add_argument("--prefetch-degree", type=int, default=PREFETCH_DEGREE,
                   help=f"PREFETCH.DEGREE, 0..15 (default {PREFETCH_DEGREE}; the paper's 5)")
    g.add_argument("--squash-prob", type=float, default=0.0, metavar="P",
                   help="TEPL mode: squash (a mispredicted branch) with chance P per cycle with a TEPL in flight; "
                        "the aborted TEPLs are reissued (default 0)")
    c = p.add_argument_group("campaign")
    c.add_argument("--modes", type=lambda t: t.split(","), default=list(modes), metavar="MODES",
                   help=f"comma-separated invocation modes among {', '.join(MODES)} (default {','.join(modes)})")
    many = ", comma-separated: one design per count" if sweep else ""
    c.add_argument("--loaders", type=number_list(int) if sweep else int, default=[LOADERS] if sweep else LOADERS,
                   help=f"loaders of the PE, {LOADER_CHOICES[0]}..{LOADER_CHOICES[-1]}{many} "
                        f"(default {LOADERS}, the paper's)")
    c.add_argument("--jobs", type=int, default=2, help="simulator runs in parallel (default 2)")
    c.add_argument("--cluster", metavar="ADDRESS", help="run the points on a Dask cluster: a scheduler's address "
                   "(tcp://host:8786) or local:N for N worker processes here (instead of --jobs)")
    c.add_argument("--cache", type=Path, metavar="DIR", help="--cluster: a folder every worker sees (shared file "
                   "system) for the Verilog and simulator builds (default: each worker's own build/)")
    c.add_argument("--sim", choices=SIMULATORS, default="verilator", help="simulator (default verilator)")
    c.add_argument("--engine", metavar="ENGINE", help="fast (the models in C++ around the Verilated PE; the default on "
                   "Verilator) or python (the cocotb testbench, the default on Icarus); the same records")
    c.add_argument("--seed", type=int, default=1, help="seed of the weights and latencies (default 1)")
    c.add_argument("--baseline", metavar="JSON|none",
                   help="software engine measured by 'deca baseline' that the report compares with "
                        "(default: out/baseline/platform.json when it exists)")
    add_storage_arguments(p)


def _loader_counts(args):
    """The loader counts asked for, each once and checked: deca sweep takes a list, deca run one."""
    return loader_counts(args.loaders if isinstance(args.loaders, list) else [args.loaders])


def _loaders(counts):
    """How a title names the loader counts when they are not just the paper's."""
    return "" if counts == [LOADERS] else f" with {', '.join(map(str, counts))} loaders"


def _campaign(args, tiles, replace, **extra):
    from .campaign import Campaign, check_engine, code_digest, default_engine

    args.engine = args.engine or default_engine(args.sim)
    check_engine(args.engine, args.sim)

    sys_ = system(args.platform, args.platforms, bandwidth=args.bandwidth, miss_latency=args.miss_latency,
                  hit_latency=args.hit_latency, link_latency=args.link_latency, tepl_queue=args.tepl_queue,
                  batch=args.batch, prefetch_degree=args.prefetch_degree, squash_prob=args.squash_prob)
    for mode in args.modes:
        if mode not in MODES:
            raise UsageError(f"unknown invocation mode {mode!r}; choose from {', '.join(MODES)}")
    if isinstance(tiles, bool) or tiles < 1:
        raise UsageError(f"--tiles must be a positive number of tiles, got {tiles}")
    _loader_counts(args)  # every count checked before anything is built
    if args.cluster:
        from deca.cluster import cluster_address

        cluster_address(args.cluster)
    elif args.cache:
        raise UsageError("--cache is where the workers of a --cluster share builds; give --cluster too")
    settings = {"system": sys_.as_dict(), "tiles": tiles, "seed": args.seed, "sim": args.sim, "code": code_digest(),
                **extra}
    # Storage other than the defaults, checked on every design before anything is built.
    from deca.hw.params import STORAGE
    from deca.hw.pe import check_pe_params

    from .campaign import designs

    chosen = storage(args)
    listed = [v if isinstance(v, list) else [v] for v in (args.W, args.L)]
    for W, L, loaders in designs(*listed, _loader_counts(args))[0]:
        check_pe_params(W, L, loaders=loaders, **chosen)
    other = {name: value for name, value in chosen.items() if value != STORAGE[name]}
    if other:
        settings["storage"] = other
    return Campaign(args.out, settings, replace=replace)


def _finish(campaign, points, args, title, explanations=()):
    from deca.sim.model.measured import chosen_engine

    from .campaign import stderr_log, write_tables
    from .report import print_summary, write_report

    # The software engine the reports compare with; a bad file fails before the runs.
    measured = chosen_engine(args.baseline)
    try:
        records = campaign.run(points, args.sim, args.jobs, log=stderr_log, engine=args.engine, cluster=args.cluster,
                               cache=args.cache)
    except KeyboardInterrupt:
        sys.exit(130)
    print_summary(records, measured)
    csv_path, json_path = write_tables(records, args.out)
    command = "deca " + shlex.join(map(str, args.argv))
    report = write_report(args.out, records, title, command, campaign.settings, explanations, measured)
    print(f"\nwrote {report}, {csv_path.name}, {json_path.name} and plots in {args.out}")
    return records


def cmd_run(args):
    if args.model is not None:
        return cmd_run_model(args)
    from .campaign import designs
    from .point import Point

    if args.matrix is not None:
        if not args.matrix.is_file():
            raise UsageError(f"no such compressed matrix: {args.matrix}")
        cm = load(args.matrix)  # a malformed file fails here, before any build
        workloads = [str(args.matrix.resolve())]
        tiles = min(args.tiles, cm.num_tiles)
        extra = {"matrix": hashlib.sha256(args.matrix.read_bytes()).hexdigest()[:16]}
    else:
        workloads, tiles, extra = list(RUN_WORKLOADS), args.tiles, {}
    valid, skipped = designs([args.W], [args.L])
    if skipped:
        raise UsageError(skipped[0][2])
    campaign = _campaign(args, tiles, replace=True, **extra)
    loaders = _loaders([args.loaders])
    print(f"deca run: PE W={args.W} L={args.L}{loaders} on {args.sim}, {len(workloads)} workloads x {len(args.modes)} modes, "
          f"{tiles} tiles each, seed {args.seed} (reproduce with --seed {args.seed})")
    points = [Point(args.W, args.L, w, m, args.loaders) for w in workloads for m in args.modes]
    _finish(campaign, points, args, f"DECA PE W={args.W}, L={args.L}{loaders}: measured on {args.sim}", [TABLE4_NOTE])


def cmd_run_model(args):
    """``deca run --model FOLDER``: a sample of tiles of each selected layer (see ``.layers``)."""
    from .campaign import designs
    from .layers import layer_samples, points, report

    if args.matrix is not None:
        raise UsageError("give --matrix or --model, not both")
    if args.tiles_per_layer < 1:
        raise UsageError(f"--tiles-per-layer must be a positive number of tiles, got {args.tiles_per_layer}")
    valid, skipped = designs([args.W], [args.L])
    if skipped:
        raise UsageError(skipped[0][2])
    samples = layer_samples(args.model, args.layers, args.tiles_per_layer, args.seed, args.out / "samples")
    digest = hashlib.sha256(b"".join(path.read_bytes() for _, path, _ in samples)).hexdigest()[:16]
    campaign = _campaign(args, args.tiles_per_layer, replace=True, model=digest)
    loaders = _loaders([args.loaders])
    print(f"deca run: PE W={args.W} L={args.L}{loaders} on {args.sim}, {len(samples)} layers of {args.model} x "
          f"{len(args.modes)} modes, up to {args.tiles_per_layer} sampled tiles each, seed {args.seed}")
    records = _finish(campaign, points(samples, args.W, args.L, args.modes, args.loaders), args,
                      f"DECA PE W={args.W}, L={args.L}{loaders}: layers of {args.model} measured on {args.sim}")
    report(samples, records, args.W, args.L, args.out)


def cmd_sweep(args):
    from .campaign import designs, stderr_log
    from .point import Point, workload_name

    loaders = _loader_counts(args)
    valid, skipped = designs(args.W, args.L, loaders)
    for W, L, why in skipped:
        stderr_log(f"skipping W={W} L={L}: {why}")
    if not valid:
        raise UsageError("no valid (W, L) in the grid")
    for scheme in args.schemes:
        if scheme not in SCHEMES:
            raise UsageError(f"unknown scheme {scheme!r}; choose from {', '.join(SCHEMES)}")
    for d in args.densities:
        if not 0 < d <= 1:
            raise UsageError(f"densities must be in (0, 1], got {d}")
    campaign = _campaign(args, args.tiles, replace=False)
    points = [Point(W, L, workload_name(s, d), m, n) for W, L, n in valid for s in args.schemes
              for d in args.densities for m in args.modes]
    print(f"deca sweep: {len(valid)} designs{_loaders(loaders)} x {len(args.schemes) * len(args.densities)} workloads x "
          f"{len(args.modes)} modes = {len(points)} points, {args.tiles} tiles each, seed {args.seed}")
    title = "W x L" + (" x loaders" if len(loaders) > 1 else _loaders(loaders))
    _finish(campaign, points, args, f"DECA PE sweep over {title} on {args.sim}")


def add_measure_parsers(sub):
    r = sub.add_parser("run", help="the main job: generate the PE, measure the default workloads on the RTL, report")
    r.add_argument("--W", type=int, default=32, help="elements per vOp (default 32)")
    r.add_argument("--L", type=int, default=8, help="big LUTs (default 8)")
    r.add_argument("--matrix", type=Path, help="measure your own compressed matrix (.deca, from deca compress)")
    r.add_argument("--tiles", type=int, default=256, help="tiles per workload (default 256; a --matrix: its first ones)")
    r.add_argument("--model", type=Path, metavar="FOLDER",
                   help="measure the layers of a compressed checkpoint (deca compress MODEL -o FOLDER)")
    r.add_argument("--layers", metavar="REGEX", help="--model: the layers whose names match (default all)")
    r.add_argument("--tiles-per-layer", type=int, default=64,
                   help="--model: tiles sampled at random from each layer (default 64)")
    r.add_argument("--out", type=Path, default=Path("out/run"), help="output folder (default out/run)")
    _add_system(r, MODES)
    r.set_defaults(func=cmd_run)

    s = sub.add_parser("sweep", help="measure a W x L x workload grid on the RTL (parallel, resumable)")
    s.add_argument("--W", type=number_list(int), default=list(SWEEP_W), help="comma-separated W (default 8,16,32,64)")
    s.add_argument("--L", type=number_list(int), default=list(SWEEP_L), help="comma-separated L (default 4,8,16,32,64)")
    s.add_argument("--schemes", type=lambda t: t.split(","), default=list(SWEEP_SCHEMES),
                   help="comma-separated schemes (default bf8,mxfp4,bf16)")
    s.add_argument("--densities", type=number_list(float), default=list(SWEEP_DENSITIES),
                   help="comma-separated densities (default 1,0.5,0.2,0.05)")
    s.add_argument("--tiles", type=int, default=128, help="tiles per point (default 128)")
    s.add_argument("--out", type=Path, default=Path("out/sweep"), help="output folder (default out/sweep)")
    _add_system(s, ["tepl"], sweep=True)
    s.set_defaults(func=cmd_sweep)
