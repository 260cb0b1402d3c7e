"""A run folder that cannot be corrupted or hijacked: what train() resumes, repairs, and refuses."""
import json
import os
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from test_rl_loop import TASK, _cfg, _policy, _strip
from toy_rl.rl.loop import train
from toy_rl.rl.run_folder import lock_run


def _stop_at(step):
    """An on_update hook that presses Ctrl-C at update ``step`` (after the update, before it is logged)."""
    def hook(record, batch, logp):
        if record["step"] == step:
            raise KeyboardInterrupt
    return hook


def _cut(out, at, **kw):
    with pytest.raises(KeyboardInterrupt):
        train(_cfg(**kw), _policy(), TASK, out, progress=False, on_update=_stop_at(at))


def _steps(out):
    return [(r["step"], bool(r.get("final"))) for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())]


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """The uninterrupted 6-update run every resumed run must reproduce."""
    return train(_cfg(), _policy(), TASK, tmp_path_factory.mktemp("full"), progress=False)


def test_ctrl_c_leaves_a_resumable_run(tmp_path, full):
    _cut(tmp_path, at=3)                                       # checkpoint after 2 updates; 0, 1, 2 logged
    assert _steps(tmp_path) == [(0, False), (1, False), (2, False)]
    with lock_run(tmp_path):                                   # the interrupted run let go of the folder
        pass
    resumed = train(_cfg(), _policy(seed=1), TASK, tmp_path, progress=False)
    assert _strip(resumed) == _strip(full)
    assert _steps(tmp_path) == [(s, False) for s in range(6)] + [(6, True)]   # update 2 logged again, once


def test_a_crafted_checkpoint_is_refused_and_runs_nothing(tmp_path):
    from test_run_folder import WritesAFile
    train(_cfg(steps=2), _policy(), TASK, tmp_path, progress=False)
    marker = tmp_path / "pwned"
    torch.save({"step": 2, "weights": WritesAFile(marker), "optimizer": {}, "source": {}, "torch_rng": None},
               tmp_path / "checkpoint.pt")
    with pytest.raises(ValueError, match=r"checkpoint\.pt holds Python objects .* refused"):
        train(_cfg(steps=2), _policy(), TASK, tmp_path, progress=False)
    assert not marker.exists()


def test_checkpoints_hold_only_tensors_and_plain_values(tmp_path):
    """Pending rollouts (reuse queue, partial-rollout pool) and lag snapshots load with weights_only=True."""
    for name, kw in dict(reuse=dict(staleness=2), lag=dict(staleness=2, mode="lag"), partial=dict(partial=1)).items():
        _cut(tmp_path / name, at=3, **kw)
        state = torch.load(tmp_path / name / "checkpoint.pt", weights_only=True)
        assert state["step"] == 2
    assert state["source"]["pool"]                              # partial rollout: unfinished answers were saved


def test_a_checkpoint_from_before_plain_state_still_resumes(tmp_path):
    """Earlier toy_rl pickled pending rollouts as Group/Answer/Problem objects: those plain data classes
    (and nothing else) are allowed when loading, so existing run folders resume to the same records."""
    from toy_rl.rl.rollout import group_from_plain
    full = train(_cfg(staleness=2), _policy(), TASK, tmp_path / "full", progress=False)
    _cut(tmp_path / "cut", at=3, staleness=2)
    path = tmp_path / "cut" / "checkpoint.pt"
    state = torch.load(path, weights_only=True)
    state["source"]["queue"] = [[group_from_plain(g) for g in batch] for batch in state["source"]["queue"]]
    assert state["source"]["queue"]
    torch.save(state, path)                                   # as the old code wrote it
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)
    resumed = train(_cfg(staleness=2), _policy(seed=1), TASK, tmp_path / "cut", progress=False)
    assert _strip(resumed) == _strip(full)
    assert torch.load(path, weights_only=True)["step"] == 6    # and the next checkpoint is plain


def test_a_shorter_run_is_refused_not_misreported(tmp_path):
    train(_cfg(steps=4), _policy(), TASK, tmp_path / "done", progress=False)
    _cut(tmp_path / "cut", at=3, steps=6)
    for out in (tmp_path / "done", tmp_path / "cut"):
        before = {f: (out / f).read_bytes() for f in ("config.json", "metrics.jsonl", "checkpoint.pt")}
        with pytest.raises(ValueError, match=r"holds a run of \d updates; this config asks for 2"):
            train(_cfg(steps=2), _policy(), TASK, out, progress=False)
        assert {f: (out / f).read_bytes() for f in before} == before


def test_a_longer_run_extends_a_finished_one(tmp_path, full):
    train(_cfg(steps=3), _policy(), TASK, tmp_path, progress=False)
    extended = train(_cfg(steps=6), _policy(seed=1), TASK, tmp_path, progress=False)
    assert _strip(extended) == _strip(full)
    assert json.loads((tmp_path / "config.json").read_text())["steps"] == 6


def test_every_other_field_must_match(tmp_path):
    train(_cfg(steps=1), _policy(), TASK, tmp_path, progress=False)
    for change in (dict(eval_size=9), dict(lr=2e-3), dict(temperature=0.5), dict(seed=1), dict(rule="symmetric")):
        with pytest.raises(ValueError, match=f"another config .*'{next(iter(change))}'"):
            train(_cfg(steps=1, **change), _policy(), TASK, tmp_path, progress=False)
    train(_cfg(steps=1, eval_size=9), _policy(), TASK, tmp_path, resume=False, progress=False)   # start over


def test_start_over_never_resumes_the_old_checkpoint(tmp_path):
    _cut(tmp_path, at=3)
    with pytest.raises(KeyboardInterrupt):                    # start over with another lr, stopped before a checkpoint
        train(_cfg(lr=2e-3), _policy(), TASK, tmp_path, resume=False, progress=False, on_update=_stop_at(1))
    assert not (tmp_path / "checkpoint.pt").exists()
    again = train(_cfg(lr=2e-3), _policy(), TASK, tmp_path, progress=False)   # from update 0, not from the old run
    assert _strip(again) == _strip(train(_cfg(lr=2e-3), _policy(), TASK, tmp_path / "ref", progress=False))


def _damage(out, how):
    metrics = out / "metrics.jsonl"
    lines = metrics.read_text().splitlines()                 # updates 0..4 logged, checkpoint after 4
    if how == "metrics missing":
        metrics.unlink()
    elif how == "config missing":
        (out / "config.json").unlink()
    elif how == "empty checkpoint":
        (out / "checkpoint.pt").write_bytes(b"")
    else:
        lines = {"gap": lines[:1] + lines[3:], "duplicate": lines[:2] + lines[1:],
                 "damaged line": lines[:1] + ['{"step": 1, "rew'] + lines[2:]}[how]
        metrics.write_text("".join(line + "\n" for line in lines))


@pytest.mark.parametrize("how, message", [
    ("metrics missing", r"metrics\.jsonl is missing"),
    ("gap", r"metrics\.jsonl: updates \[1, 2\] missing"),
    ("duplicate", r"metrics\.jsonl: updates \[1\] logged twice"),
    ("damaged line", r"metrics\.jsonl, line 2 is damaged"),
    ("config missing", r"checkpoint\.pt has no config\.json"),
    ("empty checkpoint", r"checkpoint\.pt is empty.*delete it"),
])
def test_a_damaged_run_is_refused_with_the_file_named(tmp_path, how, message):
    _cut(tmp_path, at=5)
    _damage(tmp_path, how)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    with pytest.raises(ValueError, match=message):
        train(_cfg(), _policy(), TASK, tmp_path, progress=False)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before   # nothing rewritten


def test_a_torn_last_line_is_repaired(tmp_path, full):
    _cut(tmp_path, at=5)
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"step": 5, "rew')                          # the write of update 5 was cut short
    with pytest.warns(UserWarning, match=r"metrics\.jsonl: dropped a torn last line"):
        resumed = train(_cfg(), _policy(seed=1), TASK, tmp_path, progress=False)
    assert _strip(resumed) == _strip(full)


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from test_rl_loop import TASK, _cfg, _policy
    from toy_rl.rl.loop import train
    out = Path(sys.argv[1])

    def wait_at_update_1(record, batch, logp):
        if record["step"] == 1:
            (out.parent / "started").touch()
            while not (out.parent / "go").exists():
                time.sleep(0.05)

    train(_cfg(), _policy(), TASK, out, progress=False, on_update=wait_at_update_1)
""")


def test_a_second_run_into_a_busy_folder_fails_fast(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen([sys.executable, "-c", HOLDER, str(out), str(Path(__file__).parent)], env=env)
    try:
        t0 = time.perf_counter()
        while not (tmp_path / "started").exists():
            assert first.poll() is None and time.perf_counter() - t0 < 120, "the first run did not start"
            time.sleep(0.05)
        t1 = time.perf_counter()
        with pytest.raises(RuntimeError, match=f"run folder .*run is in use by another process \\(pid {first.pid}\\)"):
            train(_cfg(), _policy(), TASK, out, progress=False)
        assert time.perf_counter() - t1 < 5
    finally:
        (tmp_path / "go").touch()
        assert first.wait(timeout=120) == 0
    assert _steps(out) == [(s, False) for s in range(6)] + [(6, True)]        # the first run's log, clean


@pytest.mark.parametrize("other", [dict(seed=1), dict(rule="symmetric"), dict(staleness=2)])
def test_a_checkpoint_from_another_run_is_refused_by_name(tmp_path, other):
    """Issue 30: seed 1's checkpoint copied over seed 0's resumed silently, so "seed 0"'s log was seed 1's after
    the copy; a rule swap the same way. Checkpoints now carry the run's identity and resume checks it."""
    import shutil
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    base = dict(steps=4)
    train(_cfg(**base), _policy(), TASK, mine, progress=False)
    train(_cfg(**base, **other), _policy(), TASK, theirs, progress=False)
    shutil.copyfile(theirs / "checkpoint.pt", mine / "checkpoint.pt")
    field = next(iter(other))
    with pytest.raises(ValueError, match=rf"belongs to another run \({field}: "):
        train(_cfg(steps=6), _policy(), TASK, mine, progress=False)          # extend "mine": refused, not mixed
    assert _steps(mine) == [(s, False) for s in range(4)] + [(4, True)]      # and its log untouched


def test_a_checkpoint_without_an_identity_still_resumes(tmp_path, full):
    """Checkpoints written before identities were saved are trusted (their config.json is still checked)."""
    _cut(tmp_path, at=3)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    del state["identity"]
    torch.save(state, tmp_path / "checkpoint.pt")
    assert _strip(train(_cfg(), _policy(seed=1), TASK, tmp_path, progress=False)) == _strip(full)


def test_leftovers_of_a_killed_write_are_removed_on_the_next_start(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    leftover = tmp_path / ".checkpoint.pt.tmp12345"
    leftover.write_bytes(b"half a checkpoint")
    train(_cfg(steps=2), _policy(), TASK, tmp_path, progress=False)
    assert not leftover.exists()


def test_the_command_line_prints_a_busy_folder_as_one_line(monkeypatch, capsys):
    """Issue 30: the lock conflict was a RuntimeError traceback and exit 1 where cli.py promises one line, exit 2."""
    from toy_rl.cli import main
    from toy_rl.commands import tour
    from toy_rl.errors import FolderInUse

    def busy(args):
        raise FolderInUse("run folder runs/x is in use by another process (pid 7); wait for it to finish")
    monkeypatch.setattr(tour, "run", busy)
    assert main(["tour", "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "in use by another process (pid 7)" in err


@pytest.mark.parametrize("field, value", [("steps", "6"), ("lr", "fast"), ("seed", 1.5), ("rule", 3)])
def test_a_config_field_of_the_wrong_type_is_one_message_naming_it(tmp_path, field, value):
    """Issue 30: '"steps": "6"' in config.json was a TypeError traceback."""
    train(_cfg(steps=2), _policy(), TASK, tmp_path, progress=False)
    saved = json.loads((tmp_path / "config.json").read_text())
    saved[field] = value
    (tmp_path / "config.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=rf"config.json: '{field}' is {value!r}"):
        train(_cfg(steps=4), _policy(), TASK, tmp_path, progress=False)
