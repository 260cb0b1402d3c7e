"""A full disk is one line naming the path, nothing half-written (issue 30: a checkpoint write on a full disk was a
40-line torch traceback without "No space left on device", exit 1).

Runs on a real 256 KiB tmpfs where this process may mount one (root on Linux, as in CI); elsewhere on a patched
torch.save that fails as torch does on a full disk."""
import errno
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from toy_rl.rl import run_folder
from toy_rl.rl.run_folder import save_state, write_text


@pytest.fixture
def full_folder(tmp_path, monkeypatch):
    """A folder on a small filesystem whose free space is about to run out; yields (folder, real)."""
    mount = tmp_path / "small"
    mount.mkdir()
    real = (os.geteuid() == 0 and shutil.which("mount") is not None and
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                           capture_output=True).returncode == 0)
    if not real:
        def save_fails(obj, f, *a, **kw):
            raise RuntimeError("[enforce fail at inline_container.cc:783] . PytorchStreamWriter failed writing "
                               "file data/0: file write failed")
        monkeypatch.setattr(run_folder.torch, "save", save_fails)
        monkeypatch.setattr(run_folder.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(1, 1, 0))
    try:
        yield mount, real
    finally:
        if real:          # lazy: a failed torch.save may still hold its file until garbage collection
            subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_checkpoint_on_a_full_disk_is_enospc_naming_the_file_and_the_old_one_stays(full_folder):
    folder, real = full_folder
    save_state(folder / "checkpoint.pt", {"step": 1, "w": torch.zeros(10)})        # small: fits
    before = (folder / "checkpoint.pt").read_bytes()
    with pytest.raises(OSError) as err:
        save_state(folder / "checkpoint.pt", {"step": 2, "w": torch.zeros(1_000_000)})   # 4 MB: does not fit
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(folder / "checkpoint.pt")
    assert "No space left on device" in err.value.strerror
    assert (folder / "checkpoint.pt").read_bytes() == before                     # the old checkpoint intact
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint.pt"]        # no temporary file left


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a real small filesystem (root, to mount a tmpfs)")
def test_the_command_line_says_so_in_one_line(full_folder):
    """A config.json that does not fit, through `toy-rl`: one line naming the path and the cause, exit 2."""
    folder, real = full_folder
    if not real:
        pytest.skip("no tmpfs could be mounted")
    (folder / "filler").write_bytes(b"\0" * (256 * 1024 - 8192))                 # leave almost nothing free
    out = subprocess.run([sys.executable, "-c", "import sys; from toy_rl.cli import main; from toy_rl.rl.run_folder "
                          "import write_text\nsys.argv = ['toy-rl']\ndef run(args):\n    write_text(sys.argv_out, "
                          "'x' * 100_000)\nimport toy_rl.commands.tour as t; t.run = run; sys.argv_out = "
                          f"{str(folder / 'config.json')!r}\nsys.exit(main(['tour', '--no-plot']))"],
                         capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "No space left on device" in out.stderr
    assert str(folder / "config.json") in out.stderr and not (folder / "config.json").exists()
