"""Fault injection: a run killed outright (SIGKILL, no clean-up of any kind) at random points -- between updates,
or in the middle of writing its checkpoint -- resumes to exactly the records of a run never interrupted.

The promises behind this suite and the tests of each are listed in docs/reliability.md."""
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_rl_loop import TASK, _cfg, _policy, _strip
from toy_rl.rl.loop import train

KILLED = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, sys.argv[3])
    from test_rl_loop import TASK, _cfg, _policy
    from toy_rl.rl import run_folder
    from toy_rl.rl.loop import train
    out, where = sys.argv[1], sys.argv[2]
    kind, at = where.split(":")
    at = int(at)

    def kill_at_update(record, batch, logp):
        if kind == "update" and record["step"] == at:
            os.kill(os.getpid(), signal.SIGKILL)

    real_save = run_folder.torch.save
    saves = [0]

    def save_then_die(obj, f, *a, **kw):            # the checkpoint's temporary file half written, then death
        saves[0] += 1
        if kind == "checkpoint" and saves[0] == at:
            with open(f, "wb") as half:
                half.write(b"PK\\x03\\x04 half a zip")
            os.kill(os.getpid(), signal.SIGKILL)
        return real_save(obj, f, *a, **kw)
    run_folder.torch.save = save_then_die
    train(_cfg(), _policy(), TASK, out, progress=False, on_update=kill_at_update)
""")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    return _strip(train(_cfg(), _policy(), TASK, tmp_path_factory.mktemp("full"), progress=False))


POINTS = [f"update:{k}" for k in sorted(random.Random(30).sample(range(6), 3))] + ["checkpoint:2"]


@pytest.mark.parametrize("where", POINTS)
def test_a_sigkilled_run_resumes_to_the_uninterrupted_records(tmp_path, uninterrupted, where):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "OMP_NUM_THREADS": "1"}
    killed = subprocess.run([sys.executable, "-c", KILLED, str(out), where, str(Path(__file__).parent)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    if where.startswith("checkpoint"):
        assert list(out.glob(".checkpoint.pt.tmp*")), "the kill did not leave a half-written temporary file"
    seed = 1 if (out / "checkpoint.pt").exists() else 0   # from a checkpoint, other initial weights must not matter
    resumed = train(_cfg(), _policy(seed=seed), TASK, out, progress=False)
    assert _strip(resumed) == uninterrupted
    assert not list(out.glob(".*.tmp*"))                                 # the leftover was cleaned
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(6)) + [6]
