"""Worker processes that die with their parent, whatever signal ends it.

``toy-rl arithmetic --compare --workers 2`` trains runs in a pool of processes. When the parent is killed
(SIGTERM or SIGKILL: what ``timeout``, CI and schedulers send) a plain pool's workers live on, training into
run folders nobody reads, at ~300-400 MB each. Each worker here asks Linux to send it SIGKILL when its parent
dies (``prctl(PR_SET_PDEATHSIG)``), and exits at once if the parent is already gone when it starts. Runs are
resumable, so a killed worker loses at most the updates since its last checkpoint.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Pool initializer: SIGKILL this process when ``parent`` dies (Linux; elsewhere nothing is set)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:                       # the parent died before the signal was armed
        os._exit(1)


class WorkerDied(OSError):
    """A worker process ended abruptly while it trained (SIGKILL: most often Linux's out-of-memory killer)."""


def map_in_pool(fn, items: list, workers: int, fresh: bool = False) -> list:
    """``[fn(x) for x in items]`` in a :func:`process_pool` of ``workers`` (``fresh``: a new process for each item);
    a worker killed midway is a :class:`WorkerDied` that says what is kept and what to do, not a bare
    ``BrokenProcessPool``."""
    with process_pool(workers, fresh) as pool:
        try:
            return list(pool.map(fn, items))
        except BrokenProcessPool as err:
            raise WorkerDied(f"a worker process was killed while training ({len(items)} runs, {workers} at once), "
                             "most often by the out-of-memory killer; finished runs are kept and the others resume "
                             "from their last checkpoint: rerun the same command, with fewer --workers if memory "
                             "is short") from err


def process_pool(workers: int, fresh: bool = False) -> ProcessPoolExecutor:
    """A pool of ``workers`` fresh ("spawn") processes that die with this one. ``fresh``: each process runs one task
    and exits, so the memory a task held goes back to the system with it (a process keeps the peak of what it
    allocated: a rung-3 worker that trained BAPO with held graphs sat at 12.4 GiB through the next run it was given,
    bench/README.md)."""
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=die_with_parent,
                               initargs=(os.getpid(),), max_tasks_per_child=1 if fresh else None)
