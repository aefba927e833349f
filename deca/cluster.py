"""Units of work on a Dask distributed cluster: ``--cluster ADDRESS`` (a running scheduler,
``tcp://host:8786``) or ``--cluster local:N`` (a LocalCluster of N worker processes on this host).

Only the cluster path imports this module, and only it imports Dask. A task carries what it
needs (a design's parameters) and returns its record; the client writes the records, so the
workers need no shared file system. A worker lost mid-task has its task rescheduled on another
(up to ``ALLOWED_FAILURES`` times); a task that raises fails once, not retried.
"""

import logging
import re
from contextlib import contextmanager

from deca.errors import UsageError

LOCAL = "local:"
#: How long the client waits for a scheduler to answer, and for its first worker.
CONNECT_SECONDS = 5
#: Deaths of workers running a task before the scheduler gives it up (KilledWorker); a LocalCluster's
#: scheduler takes it from here, a remote one from its own configuration (the same key).
ALLOWED_FAILURES = 3
_ADDRESS = re.compile(r"^([a-z]+://)?[^\s:/]+:\d+$")


class ClusterError(UsageError):
    """The cluster cannot run the work (no scheduler, no workers, workers without the project)."""


def cluster_address(text):
    """``--cluster``'s value checked: ``local:N`` with N >= 1, or a scheduler address host:port."""
    if text.startswith(LOCAL):
        n = text[len(LOCAL):]
        if not n.isdigit() or int(n) < 1:
            raise ClusterError(f"--cluster local:N takes a positive number of worker processes, got {text!r}")
        return text
    if not _ADDRESS.match(text):
        raise ClusterError(f"--cluster takes a scheduler address like tcp://host:8786 or local:N, got {text!r}")
    return text


@contextmanager
def connect(address, log, check=None):
    """A ``distributed.Client`` on ``address`` (see ``cluster_address``) whose workers have the
    project installed; ``check``, if given, is a function of the project run on every worker that
    returns what must equal the client's (e.g. the code digest records depend on)."""
    cluster_address(address)
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError as e:
        raise ClusterError(f"--cluster needs Dask here ({e}); 'bash scripts/setup.sh' installs it") from None
    dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES})
    cluster = None
    try:
        if address.startswith(LOCAL):
            # One thread per worker: a task is a simulator or a synthesis using a core of its own.
            cluster = LocalCluster(n_workers=int(address[len(LOCAL):]), threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address=":0", silence_logs=logging.ERROR)
        try:
            client = Client(cluster or address, timeout=f"{CONNECT_SECONDS}s")
        except (OSError, TimeoutError) as e:
            raise ClusterError(f"no Dask scheduler answers at {address} within {CONNECT_SECONDS} s ({e})") from None
        with client:
            try:
                client.wait_for_workers(1, timeout=CONNECT_SECONDS)
            except TimeoutError:
                raise ClusterError(f"the Dask scheduler at {address} has no workers "
                                   f"(start some with: dask worker {address} --nworkers N)") from None
            _check_workers(client, check)
            workers = client.scheduler_info(n_workers=-1)["workers"]
            services = client.scheduler_info()["services"]
            log(f"Dask cluster {client.scheduler.address}: {len(workers)} worker"
                f"{'s' * (len(workers) > 1)}, {sum(w['nthreads'] for w in workers.values())} threads"
                + (f"; dashboard {client.dashboard_link}" if "dashboard" in services else "; no dashboard "
                   "(install bokeh on the scheduler for one)"))
            yield client
    finally:
        if cluster is not None:
            cluster.close()


def _check_workers(client, check):
    """Refuse a cluster whose workers lack the project (by name) or run other code than the client."""
    # A builtin with the import as text: it reaches a worker without the project, where it fails.
    answers = client.run(exec, "import deca.cluster", on_error="return")
    missing = [worker for worker, answer in answers.items() if isinstance(answer, BaseException)]
    if missing:
        raise ClusterError(f"{len(missing)} of {len(answers)} Dask workers lack the deca package "
                           f"({missing[0]}: {type(answers[missing[0]]).__name__}: {answers[missing[0]]}); "
                           "run 'bash scripts/setup.sh' on every worker host")
    if check is not None:
        mine = check()
        answers = client.run(check, on_error="return")
        other = {worker: answer for worker, answer in answers.items() if answer != mine}
        if other:
            worker, answer = next(iter(other.items()))
            raise ClusterError(f"{len(other)} of {len(answers)} Dask workers run other deca code than this client "
                               f"({worker}: {answer!r}, here {mine!r}); install the same commit everywhere")


def retried(client, futures):
    """How many of ``futures`` (still held) the scheduler ran again after losing a worker."""
    keys = [f.key for f in futures]
    return client.run_on_scheduler(
        lambda dask_scheduler, keys=keys: sum(dask_scheduler.tasks[k].suspicious > 0 for k in keys
                                              if k in dask_scheduler.tasks))
