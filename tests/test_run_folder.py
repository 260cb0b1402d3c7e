"""Run folders: atomic state files read with weights_only, clear errors for damaged files, one writer."""
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from toy_rl.rl.run_folder import check_plain, load_state, lock_run, save_state, write_text

ROOT = Path(__file__).resolve().parents[1]


class WritesAFile:
    """Unpickling this runs code: it would create the file ``marker``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_state_round_trip_leaves_no_temporary_file(tmp_path):
    state = {"step": 3, "w": {"a": torch.arange(4.0)}, "rng": (3, tuple(range(5)), None), "q": [[1, 2.5, "x"]],
             7: True}
    save_state(tmp_path / "s.pt", state)
    back = load_state(tmp_path / "s.pt")
    assert back["rng"] == state["rng"] and back["q"] == state["q"] and back[7] is True
    assert torch.equal(back["w"]["a"], state["w"]["a"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.pt"]


def test_objects_are_not_saved(tmp_path):
    import numpy as np
    for bad, where in ((WritesAFile(tmp_path / "x"), "state['obj']"), (np.float64(1.0), "state['obj']"),
                       ([np.zeros(2)], "state['obj'][0]")):
        with pytest.raises(ValueError, match=f"{where.replace('[', '.').replace(']', '.')}.*plain values"):
            save_state(tmp_path / "s.pt", {"obj": bad})
    assert not (tmp_path / "s.pt").exists()
    check_plain({"fine": [1, None, torch.zeros(1), torch.Size([2])]})


def test_a_crafted_pickle_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "checkpoint.pt"
    torch.save({"step": 1, "payload": WritesAFile(marker)}, path)
    with pytest.raises(ValueError, match=r"checkpoint\.pt holds Python objects .* refused"):
        load_state(path)
    assert not marker.exists()


@pytest.mark.parametrize("damage", ["empty", "truncated", "junk"])
def test_a_damaged_file_is_a_value_error_naming_it(tmp_path, damage):
    path = tmp_path / "checkpoint.pt"
    save_state(path, {"w": torch.randn(100)})
    data = path.read_bytes()
    path.write_bytes({"empty": b"", "truncated": data[: len(data) // 2], "junk": b"not a torch file" * 8}[damage])
    with pytest.raises(ValueError, match=r"checkpoint\.pt .*(empty|truncated or corrupt).*delete it"):
        load_state(path)
    with pytest.raises(ValueError, match="no saved state"):
        load_state(tmp_path / "missing.pt")


def test_write_text_replaces_the_whole_file(tmp_path):
    write_text(tmp_path / "c.json", "a" * 1000)
    write_text(tmp_path / "c.json", "b")
    assert (tmp_path / "c.json").read_text() == "b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json"]


HOLD = textwrap.dedent("""
    import sys, time
    from toy_rl.rl.run_folder import lock_run
    with lock_run(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(60)
""")


def _python(code: str, *args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE, text=True,
                            env=env)


def test_a_second_process_is_refused_and_a_killed_holder_does_not_block(tmp_path):
    holder = _python(HOLD, tmp_path)
    try:
        assert holder.stdout.readline().strip() == "locked"
        t0 = time.perf_counter()
        with pytest.raises(RuntimeError, match=f"in use by another process \\(pid {holder.pid}\\)"):
            with lock_run(tmp_path):
                pass
        assert time.perf_counter() - t0 < 1                    # fails fast, does not wait
    finally:
        holder.kill()                                          # SIGKILL: no cleanup code runs
        holder.wait()
    with lock_run(tmp_path):                                   # the OS released the dead holder's lock
        with lock_run(tmp_path):                               # re-entrant in one process
            pass
        assert (tmp_path / ".lock").read_text().strip() == str(os.getpid())
