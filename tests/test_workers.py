"""Worker processes die with their parent (issue 30: SIGTERM or SIGKILL to `toy-rl arithmetic --compare --workers 2`
left both workers alive at ~300-400 MB each)."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

PARENT = textwrap.dedent("""
    import os, sys, time
    from toy_rl.workers import process_pool
    pool = process_pool(2)
    list(pool.map(int, [0, 0]))                          # start both workers
    print(" ".join(str(p.pid) for p in pool._processes.values()), flush=True)
    pool.submit(time.sleep, 600)
    time.sleep(600)
""")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:                  # a zombie (dead, not yet reaped) counts as gone
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_workers_die_with_their_parent(sig):
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(p) for p in parent.stdout.readline().split()]
        assert len(workers) == 2 and all(_alive(p) for p in workers)
        parent.send_signal(sig)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 20
        while any(_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in workers), "a worker outlived its parent"
    finally:
        parent.kill()


def _kill_self(x):
    if x:
        os.kill(os.getpid(), signal.SIGKILL)         # what the out-of-memory killer does to a worker
    return x


def test_a_killed_worker_is_a_clear_error_not_a_bare_broken_pool(capsys, monkeypatch):
    """A worker killed midway (the OOM killer took one of a rung-3 comparison's two): the command says what is kept
    and what to do, and exits 2, instead of a BrokenProcessPool traceback."""
    from toy_rl.cli import main
    from toy_rl.workers import WorkerDied, map_in_pool
    assert map_in_pool(_kill_self, [0, 0], 2) == [0, 0]
    with pytest.raises(WorkerDied, match="killed while training .* rerun the same command, with fewer --workers"):
        map_in_pool(_kill_self, [0, 1], 2)

    def dies(args):                                  # a command whose pool lost a worker
        map_in_pool(_kill_self, [1, 1], 2)
    monkeypatch.setattr("toy_rl.cli.build_parser", lambda: _parser(dies))
    assert main(["x"]) == 2
    assert "toy-rl x: error: a worker process was killed while training" in capsys.readouterr().err


def _parser(run):
    import argparse
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("x").set_defaults(_run=run)
    return parser


def test_a_fresh_pool_runs_each_task_in_its_own_process():
    """Rung 3's comparison gives each run a new process, so the memory a BAPO run held (12.4 GiB with held graphs)
    leaves with it instead of staying with the worker for its next run; the default pool reuses its workers."""
    from toy_rl.workers import map_in_pool
    fresh = map_in_pool(_pid, [0, 1, 2, 3], 2, fresh=True)
    assert len(set(fresh)) == 4
    assert len(set(map_in_pool(_pid, [0, 1, 2, 3], 2))) <= 2


def _pid(_):
    return os.getpid()
