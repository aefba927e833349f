"""``--cluster`` on this machine: a sweep's records against the local run's, a worker killed
mid-sweep, and a synthesis sweep's wall time on a Dask LocalCluster against ``--jobs``.

    .venv/bin/python benchmarks/bench_cluster.py --json out/cluster/cluster.json

1. ``deca sweep`` of 20 points (W = 8, L = 4; five schemes x four densities) with ``--jobs 1``, and
   the same with ``--cluster local:2``: the records compared field by field.
2. The same sweep on a LocalCluster of two worker processes started here, one worker process
   killed (SIGKILL, its process id) while it runs a point: the run completes; records compared.
3. ``deca synth --sweep`` of one design unit (``--design``, generic gates) over a W x L grid with
   ``--jobs 2`` and with ``--cluster local:2``, each in a fresh cache: wall times, and the wall time
   modelled for 4, 8 and 16 workers from the measured per-design seconds: the longest-processing-
   time-first schedule, never below the longest design (printed with its lower bounds).
The engine builds are made before any timing (a first run of each design).
"""

import argparse
import heapq
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from deca.sim.measure.records import first_difference, read_records

DECA = [str(Path(sys.executable).with_name("deca"))]
SWEEP = ["sweep", "--W", "8", "--L", "4", "--schemes", "bf8,mxfp4,bf16,int4,nf4", "--densities", "1,0.5,0.2,0.05",
         "--tiles", "32", "--seed", "1"]


def deca(*args):
    start = time.monotonic()
    proc = subprocess.run([*DECA, *map(str, args)], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"deca {shlex.join(map(str, args))} failed:\n{proc.stderr[-2000:]}")
    return time.monotonic() - start, proc.stdout + proc.stderr


def records(folder):
    recs = read_records(Path(folder) / "points")
    return [recs[k] for k in sorted(recs)]


def killed_sweep(out):
    """The sweep on a LocalCluster here, one worker process killed while it runs a point."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        proc = subprocess.Popen([*DECA, *SWEEP, "--out", str(out), "--cluster", cluster.scheduler_address],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        text = []
        reader = threading.Thread(target=lambda: text.extend(proc.stdout))
        reader.start()
        killed = None
        while proc.poll() is None and killed is None:
            busy = [worker for worker, keys in client.processing().items() if keys]
            if busy:
                (killed,) = client.run(os.getpid, workers=busy[:1]).values()
                os.kill(killed, signal.SIGKILL)
            time.sleep(0.05)
        proc.wait()
        reader.join()
    output = "".join(text)
    if proc.returncode:
        sys.exit(f"the sweep with a killed worker failed:\n{output[-2000:]}")
    rerun = re.search(r"(\d+) tasks? rerun after losing a worker", output)
    return killed, int(rerun.group(1))


def modelled(seconds, workers):
    """Wall time of the designs on ``workers`` workers: longest first to the least-loaded worker."""
    loads = [0.0] * workers
    for s in sorted(seconds, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + s)
    return max(loads)


def synth_seconds(output):
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^  (W=\d+ L=\d+)\S*: .*\((\d+) s\)$", output, re.M)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/cluster"), help="work folder (default out/cluster)")
    parser.add_argument("--json", type=Path, help="also write the record here")
    parser.add_argument("--design", default="tag_table", help="design unit of the synthesis sweep (default tag_table)")
    parser.add_argument("--W", default="8,16,32", help="W of the synthesis grid (default 8,16,32)")
    parser.add_argument("--L", default="4,8", help="L of the synthesis grid (default 4,8)")
    args = parser.parse_args()
    out = args.out
    if out.exists():
        subprocess.run(["rm", "-rf", str(out)], check=True)
    deca(*SWEEP[:5], "--schemes", "bf8", "--densities", "1", "--tiles", "8", "--out", out / "warm")  # the build

    rec = {"command": "python " + shlex.join(["benchmarks/bench_cluster.py", *sys.argv[1:]]),
           "cpus": os.cpu_count()}
    wall_local, _ = deca(*SWEEP, "--jobs", "1", "--out", out / "sweep-local")
    wall_cluster, _ = deca(*SWEEP, "--cluster", "local:2", "--out", out / "sweep-cluster")
    local = records(out / "sweep-local")
    pid, rerun = killed_sweep(out / "sweep-killed")
    rec["sweep"] = {"points": len(local), "argv": SWEEP, "wall_jobs1": wall_local, "wall_cluster2": wall_cluster,
                    "cluster_differs": first_difference(local, records(out / "sweep-cluster")),
                    "killed_pid": pid, "killed_rerun": rerun, "killed_points": len(records(out / "sweep-killed")),
                    "killed_differs": first_difference(local, records(out / "sweep-killed"))}
    print(json.dumps(rec["sweep"], indent=1), flush=True)

    grid = ["synth", "--sweep", "--design", args.design, "--W", args.W, "--L", args.L, "--tech", "generic"]
    synth = {"argv": grid}
    for name, where in (("jobs2", ["--jobs", "2"]), ("cluster2", ["--cluster", "local:2"])):
        wall, output = deca(*grid, *where, "--out", out / f"synth-{name}", "--work-dir", out / f"work-{name}")
        synth[f"wall_{name}"] = wall
        synth[f"seconds_{name}"] = synth_seconds(output)
    seconds = list(synth["seconds_jobs2"].values())
    synth["modelled"] = {n: {"wall": modelled(seconds, n), "longest": max(seconds), "total_over_n": sum(seconds) / n}
                         for n in (2, 4, 8, 16)}
    a, b = (json.loads((out / f"synth-{n}" / "synth.json").read_text())["results"] for n in ("jobs2", "cluster2"))
    synth["cluster_differs"] = [{k: (x[k], y[k]) for k in x if x[k] != y[k] and k != "seconds"} for x, y in zip(a, b)]
    rec["synth"] = synth
    print(json.dumps(synth, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rec, indent=1) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
