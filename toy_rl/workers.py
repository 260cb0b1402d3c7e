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

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Pool initializer: SIGKILL this process when ``parent`` dies (Linux; elsewhere nothing is set)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:                       # the parent died before the signal was armed
        os._exit(1)


def process_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` fresh ("spawn") processes that die with this one."""
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=die_with_parent, initargs=(os.getpid(),))
