"""Measurement campaigns on the RTL: ``deca sweep`` (a W x L x loaders x workload grid) and ``deca run``.

A campaign lives in one output folder: ``settings.json`` (what every point shares: system, tiles,
seed, simulator), ``points/<key>.json`` (one record per measured point, written as soon as the
simulator finishes it) and the tables, plots and report made from them. Points already in the
folder are not run again, so an interrupted campaign resumes where it stopped; a folder measured
with other settings is refused rather than mixed.

Each design's Verilog is generated once (and cached across campaigns, ``generate_cached``) and
built once per simulator (``deca.sim.bench.runner``); its points then run in worker processes,
several points per simulator run. On a Dask cluster (``cluster``, ``deca.cluster``) each such run is
a task that generates and builds its design on the worker (in the worker's caches, or a shared
``cache`` folder) and returns its records, which the client writes here.
"""

import asyncio
import csv
import hashlib
import json
import shutil
import sys
import tempfile
import time
import zlib
from collections import defaultdict
from functools import partial
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from deca.errors import UsageError
from deca.hw.generate import generate_cached, top_name
from deca.hw.params import LOADERS, STORAGE, ParameterError, check_params
from deca.sim.bench.ports import PePorts
from deca.sim.bench.runner import BUILD_ROOT, run
from deca.synth.equiv import prove_beside
from deca.toolchain import SIMULATORS

from .records import COLUMNS, read_records, write_record

#: The PE parameters other than W and L (the generator's defaults). A campaign's settings may hold
#: ``storage``: other values of the storage parameters, for all its points (``deca run --contexts ...``).
DESIGN = {**STORAGE, "addr_bits": 48, "id_bits": 8}
VERILOG_CACHE = BUILD_ROOT.parent / "verilog"
#: How points are run: "fast", the C++ harness around the Verilated PE (``deca.sim.bench.engine``),
#: or "python", the cocotb testbench (``deca.sim.measure.tb``); they give the same records.
ENGINES = ("fast", "python")


class CampaignError(UsageError):
    """The campaign cannot run as asked (wrong folder, failed points...)."""


def code_digest():
    """Hash of what a measurement depends on: the generator, the format, the models around the PE and
    the measuring modules (not the report or the plots). A campaign folder measured with other code
    is not resumed."""
    from deca import golden, hw
    from deca.sim import bench, model

    packages = [Path(package.__file__).parent for package in (golden, hw, model, bench)]
    sources = [source for folder in packages for source in sorted(folder.glob("*.py"))]
    sources += sorted((packages[-1] / "csrc").iterdir())  # the fast engine's C++
    sources += [Path(__file__).with_name(f"{module}.py") for module in ("point", "records", "tb")]
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def designs(Ws, Ls, loaders=(LOADERS,)):
    """(valid [(W, L, loaders)], skipped [(W, L, reason)]) of the grid Ws x Ls x loaders (loader
    counts already checked)."""
    valid, skipped = [], []
    for W in Ws:
        for L in Ls:
            try:
                check_params(W, L)
                valid += [(W, L, n) for n in loaders]
            except ParameterError as e:
                skipped.append((W, L, str(e)))
    return valid, skipped


#: The arithmetic style of each engine's Verilog (``deca.hw.arith``): the fast engine's model has
#: the helpers as Verilog operators, which Verilator runs about twice as fast, each of them proven
#: equal to the gates that synthesis maps (``deca.synth.equiv``); the cocotb testbench runs the gates.
ENGINE_ARITH = {"fast": "operators", "python": "gates"}


def _generate(W, L, loaders, cache=None, storage=None, engine="python"):
    """The design's Verilog for ``engine`` (cached); the fast engine's once its arithmetic is proven."""
    arith = ENGINE_ARITH[engine]
    path = generate_cached(W, L, Path(cache) / "verilog" if cache else VERILOG_CACHE,
                           **{**DESIGN, **(storage or {})}, loaders=loaders, arith=arith)
    if arith == "operators":
        prove_beside(path)
    return str(path)


def default_engine(sim):
    """The fast engine on Verilator; the cocotb testbench on the other simulators."""
    return "fast" if sim == "verilator" else "python"


def check_engine(engine, sim):
    if engine not in ENGINES:
        raise CampaignError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "fast" and sim != "verilator":
        raise CampaignError(f"the fast engine runs on Verilator only, not {sim}; use --engine python")


def _measure(sim, verilog, W, L, points, params, run_name, engine="python", build_jobs=2, cache=None):
    """Worker: run ``points`` of the (W, L) design in one simulator run; their loader count is the design's.
    ``cache``: a folder for the builds instead of build/."""
    (loaders,) = {p.loaders for p in points}
    params = {**params, **DESIGN, **params.get("storage", {}), "W": W, "L": L, "loaders": loaders,
              "points": [p.as_dict() for p in points]}
    top = top_name("pe", W, L, params["loaders"])
    if engine == "python":
        run(sim, [verilog], top, "deca.sim.measure.tb", Path(params["out"]), params=params, run_name=run_name,
            seed=params["seed"], **({"build_root": Path(cache) / "cocotb"} if cache else {}))
        return
    from deca.sim.bench.engine import FastHarness, VerilatorBus, build

    from .point import measure_points

    ports = PePorts(params["addr_bits"], params["id_bits"], params["tags"], params["loaders"], params["contexts"])
    engine_root = {"build_root": Path(cache) / "engine"} if cache else {}
    bus = VerilatorBus(build(verilog, top, ports, jobs=build_jobs, **engine_root))
    try:
        asyncio.run(measure_points(bus, params, lambda *args: None, FastHarness))
    finally:
        bus.close()


def _measure_task(sim, points, params, engine, cache):
    """Cluster task: the records of ``points`` (of one design, in one simulator run), the design
    generated and built on this worker."""
    (W, L, loaders), = {p.design for p in points}
    with tempfile.TemporaryDirectory(prefix="deca-points-") as out:
        _measure(sim, _generate(W, L, loaders, cache, params.get("storage"), engine), W, L, points, {**params, "out": out},
                 "measure", engine, 1, cache)
        records = read_records(out)
    return [records[p.key] for p in points]


def _chunks(todo, runs):
    """``todo`` as a list of simulator runs, each of one design's points: as many as it takes to have
    ``runs`` of them (or one per design)."""
    by_design = defaultdict(list)
    for p in todo:
        by_design[p.design].append(p)
    n = max(1, -(-runs // len(by_design)))
    return [pts[i::n] for pts in by_design.values() for i in range(min(n, len(pts)))]


class Campaign:
    """The points of one output folder (see the module docstring)."""

    def __init__(self, out, settings, replace=False):
        self.out = Path(out)
        self.points_dir = self.out / "points"
        self.settings = settings
        self._check_settings(replace)

    def _check_settings(self, replace):
        """Refuse a folder measured with other settings or, with ``replace``, empty it."""
        path = self.out / "settings.json"
        if path.is_file() and replace and json.loads(path.read_text()) != self.settings:
            shutil.rmtree(self.points_dir, ignore_errors=True)
            path.unlink()
        if path.is_file():
            old = json.loads(path.read_text())
            if old != self.settings:
                diff = {k: (old.get(k), self.settings.get(k)) for k in {*old, *self.settings}
                        if old.get(k) != self.settings.get(k)}
                raise CampaignError(f"{self.out} holds points measured with other settings "
                                    f"(was, now: {diff}); choose another --out or delete the folder")
        else:
            self.out.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.settings, indent=1))

    def done(self):
        return read_records(self.points_dir) if self.points_dir.is_dir() else {}

    def run(self, points, sim="verilator", jobs=2, log=print, engine="python", cluster=None, cache=None):
        """Measure the ``points`` not in the folder yet, ``jobs`` simulator runs at a time, on
        ``engine`` (``ENGINES``), or on the Dask ``cluster`` (an address, ``deca.cluster``) with the
        workers' builds in ``cache`` (default: each worker's build/); returns the records of all
        ``points``. Progress goes to ``log``; Ctrl-C leaves finished points on disk."""
        if sim not in SIMULATORS:
            raise CampaignError(f"simulator must be one of {', '.join(SIMULATORS)}, got {sim!r}")
        check_engine(engine, sim)
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise CampaignError(f"--jobs must be a positive integer, got {jobs!r}")
        have = self.done()
        todo = [p for p in points if p.key not in have]
        where = f"on the Dask cluster {cluster}" if cluster else f"with {jobs} job{'s' * (jobs > 1)}"
        log(f"{len(points) - len(todo)} of {len(points)} points already in {self.points_dir}; "
            f"{len(todo)} to measure {where} on {sim} ({engine} engine)")
        if todo and cluster:
            self._measure_cluster(todo, sim, log, engine, cluster, cache)
        elif todo:
            self._measure(todo, sim, jobs, log, engine)
        have = self.done()
        missing = [p.key for p in points if p.key not in have]
        if missing:
            raise CampaignError(f"{len(missing)} points have no result: {', '.join(missing[:8])}"
                                + (" ..." if len(missing) > 8 else ""))
        return [have[p.key] for p in points]

    def _measure(self, todo, sim, jobs, log, engine):
        by_design = defaultdict(list)
        for p in todo:
            by_design[p.design].append(p)
        params = {**self.settings, "out": str(self.points_dir.resolve())}
        start, failures = time.monotonic(), []
        with ProcessPoolExecutor(jobs) as pool:
            try:
                log(f"generating Verilog of {len(by_design)} design{'s' * (len(by_design) > 1)} "
                    f"(cached in {VERILOG_CACHE})")
                generate = partial(_generate, storage=self.settings.get("storage"), engine=engine)
                verilog = dict(zip(by_design, pool.map(generate, *zip(*by_design))))
                # A design's points in as many runs as it takes to keep every job busy.
                tag = f"{zlib.crc32(str(self.out.resolve()).encode()):08x}"
                futures = {}
                for i, part in enumerate(_chunks(todo, jobs)):
                    W, L, loaders = part[0].design
                    futures[pool.submit(_measure, sim, verilog[W, L, loaders], W, L, part, params,
                                        f"measure-{tag}-{i}", engine, 2 if len(by_design) == 1 else 1)] = part
                self._progress(futures, len(todo), start, failures, log)
            except KeyboardInterrupt:
                pool.shutdown(wait=False, cancel_futures=True)
                log(f"\ninterrupted: {len(self.done())} points are in {self.points_dir}; run the same command "
                    "again to resume")
                raise
        if failures:
            raise CampaignError("simulator runs failed:\n" + "\n".join(failures))

    def _measure_cluster(self, todo, sim, log, engine, address, cache):
        from distributed import as_completed

        from deca.cluster import connect, retried

        params = dict(self.settings)
        start, failures, finished = time.monotonic(), [], 0
        with connect(address, log, check=code_digest) as client:
            # Two runs per worker: a worker lost repeats a small part of the work, and one finishing
            # early finds another to take. Each point of a run starts from reset: the same records.
            workers = len(client.scheduler_info(n_workers=-1)["workers"])
            futures = {client.submit(_measure_task, sim, part, params, engine, cache and str(cache), pure=False): part
                       for part in _chunks(todo, 2 * workers)}
            try:
                for future in as_completed(futures):
                    part = futures[future]
                    if future.status == "error":
                        keys = ", ".join(p.key for p in part)
                        failures.append(f"[{keys}]: {type(future.exception()).__name__}: {future.exception()}")
                        continue
                    for record in future.result():
                        write_record(self.points_dir, record)
                        finished += 1
                        _progress_line(log, finished, len(todo), record["key"], start)
                n = retried(client, futures)
                log(f"{n} task{'s' * (n != 1)} rerun after losing a worker")
            except KeyboardInterrupt:
                client.cancel(list(futures))
                log(f"\ninterrupted: {len(self.done())} points are in {self.points_dir}; run the same command "
                    "again to resume")
                raise
        if failures:
            raise CampaignError("points failed on the cluster:\n" + "\n".join(failures))

    def _progress(self, futures, total, start, failures, log):
        seen = set(self.done())
        finished = 0
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=2, return_when=FIRST_COMPLETED)
            for f in done:
                if f.exception() is not None:
                    keys = ", ".join(p.key for p in futures[f])
                    failures.append(f"[{keys}]: {f.exception()}")
            now = set(self.done())
            for key in sorted(now - seen):
                finished += 1
                _progress_line(log, finished, total, key, start)
            seen = now


def _progress_line(log, finished, total, key, start):
    bar = "#" * (20 * finished // total)
    log(f"[{bar:<20}] {finished}/{total} {key} ({(time.monotonic() - start) / 60:.1f} min)")


def write_tables(records, out):
    """``results.csv`` (one row per record, ``COLUMNS``) and ``results.json`` (the records) in ``out``."""
    out = Path(out)
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)
    (out / "results.json").write_text(json.dumps(records, indent=1))
    return out / "results.csv", out / "results.json"


def stderr_log(message):
    print(message, file=sys.stderr, flush=True)
