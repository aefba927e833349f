"""``deca verify``: the constrained-random regression of a PE design (``deca.sim.verify.regression``)
with its functional coverage (``deca.sim.verify.coverage``), blocks run in parallel processes, a
report, and the replay of a failing tile's batch with waves."""

import contextlib
import json
import resource
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from deca.errors import UsageError

#: Requests per block (the unit of work a process or a cluster worker runs).
BLOCK_TILES = 2000
#: Bins never hit that the terminal shows (the report lists all).
MISSED_SHOWN = 40


def add_verify_parser(sub):
    v = sub.add_parser("verify", help="constrained-random regression of the PE on the fast Verilator engine, with "
                                      "functional coverage")
    v.add_argument("--W", type=int, default=32, help="elements per vOp (default 32)")
    v.add_argument("--L", type=int, default=8, help="big LUTs (default 8)")
    v.add_argument("--loaders", type=int, default=2, help="TEPL ports: 2 (default), 3 or 4")
    v.add_argument("--tiles", type=int, default=100_000, help="requests to check (tiles and malformed ones; "
                                                               "default 100000)")
    v.add_argument("--seed", type=int, default=None, help="random seed (default: fresh, printed)")
    v.add_argument("--block-tiles", type=int, default=BLOCK_TILES,
                   help=f"requests per block, each block with its own seed (default {BLOCK_TILES})")
    v.add_argument("--jobs", type=int, default=1, help="blocks run in parallel processes (default 1)")
    v.add_argument("--cluster", metavar="ADDRESS", help="run the blocks on a Dask cluster, a scheduler's address "
                   "(tcp://host:8786) or local:N for N worker processes here (instead of --jobs)")
    v.add_argument("--cover-min", type=float, default=None, metavar="P",
                   help="fail unless at least P%% of the declared coverage bins were hit (0-100)")
    v.add_argument("--out", type=Path, default=Path("out/verify"), help="report folder (default out/verify)")
    v.add_argument("--mutant", default=None, metavar="NAME",
                   help="run on the PE with one injected fault (deca.sim.verify.mutants; an unknown name lists "
                        "them): passes when the regression kills it, and says at which request")
    v.add_argument("--replay", type=int, default=None, metavar="TILE",
                   help="replay the batch holding request TILE of the run with this seed under cocotb, with waves")
    v.set_defaults(func=cmd_verify)


def _check(args):
    from deca.hw.params import check_loaders, check_params

    check_params(args.W, args.L)
    check_loaders(args.loaders)
    if args.tiles < 1:
        raise UsageError(f"--tiles must be a positive number of requests, got {args.tiles}")
    if args.block_tiles < 1:
        raise UsageError(f"--block-tiles must be a positive number of requests, got {args.block_tiles}")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be a positive integer, got {args.jobs}")
    if args.cover_min is not None and not 0 <= args.cover_min <= 100:
        raise UsageError(f"--cover-min must be a percentage in 0..100, got {args.cover_min:g}")
    if args.mutant is not None:
        from .mutants import check_mutant

        check_mutant(args.mutant)
        if args.replay is not None:
            raise UsageError("--replay replays the unmutated PE; give --mutant or --replay, not both")
    if args.cluster is not None:
        from deca.cluster import cluster_address

        cluster_address(args.cluster)
        if args.replay is not None:
            raise UsageError("--replay runs one batch here; give --cluster or --replay, not both")
    if args.replay is not None and not 0 <= args.replay < args.tiles:
        raise UsageError(f"--replay must name a request of the run, 0..{args.tiles - 1}, got {args.replay}")


_BUS, _DESIGNS = {}, {}


def _block(W, L, loaders, seed, block, tiles, block_tiles, verilog, build_root):
    """Worker: one block (``tiles`` requests of a run in blocks of ``block_tiles``) on this process's
    fast-engine PE of ``verilog`` (opened once per process)."""
    from .regression import open_bus, run_block

    if verilog not in _BUS:
        _BUS[verilog] = open_bus(W, L, loaders, verilog, 1, build_root)
    return run_block(W, L, loaders, seed, block, tiles, bus=_BUS[verilog], block_tiles=block_tiles)


def _design(W, L, loaders, mutant):
    """(Verilog, engine build root) of the design, a mutant's under their own folders (None: the default)."""
    from deca.sim.measure.campaign import _generate

    if not mutant:
        return _generate(W, L, loaders, engine="fast"), None
    from deca.sim.bench.engine import ENGINE_ROOT
    from deca.sim.measure.campaign import VERILOG_CACHE

    from .mutants import mutant_verilog

    return (str(mutant_verilog(mutant, W, L, loaders, VERILOG_CACHE.parent / "mutants")),
            ENGINE_ROOT.parent / "engine-mutants" / mutant)


def _cluster_block(W, L, loaders, seed, block, tiles, block_tiles, mutant):
    """Cluster task: (the block's record, CPU seconds), the design generated and built on this worker."""
    if (W, L, loaders, mutant) not in _DESIGNS:
        _DESIGNS[W, L, loaders, mutant] = _design(W, L, loaders, mutant)
    before = resource.getrusage(resource.RUSAGE_SELF)
    record = _block(W, L, loaders, seed, block, tiles, block_tiles, *_DESIGNS[W, L, loaders, mutant])
    after = resource.getrusage(resource.RUSAGE_SELF)
    return record, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def blocks_of(tiles, block_tiles):
    """[(block, requests)] of a run of ``tiles`` requests."""
    return [(b, min(block_tiles, tiles - b * block_tiles)) for b in range(-(-tiles // block_tiles))]


def report_name(args):
    """The run's report file: runs of other designs, seeds or mutants go beside each other in one folder."""
    from deca.sim.measure.point import design_key

    return (f"verify-{design_key(args.W, args.L, args.loaders)}-seed{args.seed}"
            f"{f'-{args.mutant}' if args.mutant else ''}.json")


def replay_command(args, tile):
    return (f"deca verify --W {args.W} --L {args.L} --loaders {args.loaders} --tiles {args.tiles} --seed {args.seed} "
            f"--block-tiles {args.block_tiles} --replay {tile}")


def cmd_verify(args):
    _check(args)
    if args.seed is None:
        args.seed = int(np.random.SeedSequence().entropy % 2 ** 32)
    if args.replay is not None:
        return cmd_replay(args)
    from .coverage import report
    from .regression import merge, open_bus

    print(f"deca verify: PE W={args.W} L={args.L} loaders={args.loaders}"
          f"{f' with mutant {args.mutant}' if args.mutant else ''}, {args.tiles} requests in blocks of "
          f"{args.block_tiles}, seed {args.seed} (reproduce with --seed {args.seed})", flush=True)
    if args.mutant:
        from .mutants import MUTANTS

        print(f"mutant {args.mutant}: {MUTANTS[args.mutant][3]}", flush=True)
    if not args.cluster:  # a cluster's workers generate and build the design themselves
        verilog, build_root = _design(args.W, args.L, args.loaders, args.mutant)
        open_bus(args.W, args.L, args.loaders, verilog, 2, build_root).close()  # built once, here
    blocks = blocks_of(args.tiles, args.block_tiles)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)  # the Verilator build's processes
    cpu_before, start, records, cluster_cpu = before.ru_utime + before.ru_stime, time.monotonic(), [], 0
    with contextlib.ExitStack() as stack:
        if args.cluster:
            from deca.cluster import connect, retried
            from deca.sim.measure.campaign import code_digest

            client = stack.enter_context(connect(args.cluster, print, check=code_digest))
            futures = [client.submit(_cluster_block, args.W, args.L, args.loaders, args.seed, b, n, args.block_tiles,
                                     args.mutant, pure=False) for b, n in blocks]
        else:
            pool = stack.enter_context(ProcessPoolExecutor(args.jobs))
            futures = [pool.submit(_block, args.W, args.L, args.loaders, args.seed, b, n, args.block_tiles, verilog,
                                   build_root)
                       for b, n in blocks]
        for k, f in enumerate(futures):
            rec = f.result()
            if args.cluster:
                rec, seconds = rec
                cluster_cpu += seconds
            records.append(rec)
            print(f"block {k + 1}/{len(blocks)}: {rec['requests']} requests, {rec['cycles']} cycles, "
                  f"{len(rec['failures'])} failures ({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)
            if args.mutant and rec["failures"]:  # killed: the blocks after it are not needed
                for later in futures[k + 1:]:
                    later.cancel()
                break
        if args.cluster:
            n = retried(client, futures)
            print(f"{n} task{'s' * (n != 1)} rerun after losing a worker")
    wall = time.monotonic() - start
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the block processes, ended with the pool
    # On a cluster: the CPU time the blocks took on the workers.
    cpu = cluster_cpu if args.cluster else children.ru_utime + children.ru_stime - cpu_before
    run = merge(records)
    hit, total, missed, percent = report(run["bins"], args.loaders)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {"command": "deca " + shlex.join(map(str, args.argv)), "W": args.W, "L": args.L,
               "loaders": args.loaders, "seed": args.seed, "mutant": args.mutant, "wall_seconds": wall, "cpu_seconds": cpu,
               "coverage": {"hit": hit, "total": total, "percent": percent, "missed": missed}, **run}
    report_path = out / report_name(args)
    report_path.write_text(json.dumps(summary, indent=1))
    print(f"{run['requests']} requests checked ({run['tiles']} tiles, {run['errors']} malformed), {run['cycles']} "
          f"cycles in {wall:.0f} s, {cpu:.0f} CPU s ({60 * run['requests'] / cpu:,.0f} requests per CPU minute, "
          f"{run['cycles'] / cpu:,.0f} cycles per CPU second): "
          f"{run['mismatches']} mismatches, {run['hangs']} hangs")
    print(f"coverage: {hit} of {total} bins hit ({percent:.1f}%)")
    if missed:
        print(f"never hit: {', '.join(missed[:MISSED_SHOWN])}"
              + (f" and {len(missed) - MISSED_SHOWN} more (all in the report)" if len(missed) > MISSED_SHOWN else ""))
    print(f"wrote {report_path}")
    first = min(run["failures"], key=lambda f: f["tile"]) if run["failures"] else None
    if args.mutant:
        if first is None:
            fail(f"mutant {args.mutant} survived {run['requests']} requests")
        print(f"mutant {args.mutant} killed at request {first['tile']} ({first['tile'] + 1} requests): "
              f"{first['kind']}: {first['message']}")
        return
    if first is not None:
        fail(f"{len(run['failures'])} failing batches; first at request {first['tile']} ({first['kind']}: "
             f"{first['message']}); replay it with waves: {replay_command(args, first['tile'])}")
    if args.cover_min is not None and percent < args.cover_min:
        fail(f"coverage {percent:.1f}% is below --cover-min {args.cover_min:g}%")


def fail(message):
    """A failed verification (not bad input): the message on stderr, exit status 1."""
    print(f"deca verify: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def cmd_replay(args):
    """The batch holding request ``args.replay`` again from reset, on cocotb's Verilator with waves."""
    from deca.hw.generate import top_name
    from deca.sim.bench.runner import run
    from deca.sim.measure.campaign import _generate

    from .regression import batch_of

    block, first = divmod(args.replay, args.block_tiles)
    tiles = dict(blocks_of(args.tiles, args.block_tiles))[block]
    batch = batch_of(args.seed, block, tiles, first, args.W, args.loaders)
    params = {"W": args.W, "L": args.L, "loaders": args.loaders, "seed": args.seed, "block": block,
              "tiles": tiles, "block_tiles": args.block_tiles, "batch": batch}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"replaying batch {batch} of block {block} (request {args.replay}) with waves", flush=True)
    # The Verilog the fast engine ran, on the cocotb testbench.
    results = run("verilator", [_generate(args.W, args.L, args.loaders, engine="fast")], top_name("pe", args.W, args.L, args.loaders),
                  "deca.sim.verify.tb", out, params=params, run_name=f"replay-{args.seed}-{args.replay}", waves=True,
                  seed=args.seed)
    print(f"passed; waves and log in {Path(results).parent}")
