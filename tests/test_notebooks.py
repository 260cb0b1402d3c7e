"""Every notebooks/*.ipynb runs top to bottom in smoke mode, and keeps the conventions the runner relies on."""
import re
from pathlib import Path

import nbformat
import pytest

from toy_rl.notebook_runner import NotebookError, parameters_index, run_notebook, with_smoke

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
ids = [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_notebook_runs_in_smoke_mode(path):
    nb = run_notebook(path, smoke=True, timeout=600)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_parameters_cell_defines_smoke(path):
    nb = nbformat.read(path, as_version=4)
    cell = nb.cells[parameters_index(nb)]
    assert cell.cell_type == "code"
    assert re.search(r"^SMOKE\s*=\s*False\b", cell.source, re.M), "the parameters cell must set SMOKE = False"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_saved_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"clear the outputs of cells {dirty} before saving"


def _write(tmp_path, *cells, tag_first=True):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in cells])
    if tag_first:
        nb.cells[0].metadata["tags"] = ["parameters"]
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    return path


def test_runner_injects_smoke_after_parameters_and_runs_in_the_notebook_folder(tmp_path):
    (tmp_path / "here.txt").write_text("found")
    path = _write(tmp_path, "SMOKE = False", "assert SMOKE is True\nprint(open('here.txt').read())")
    nb = run_notebook(path, smoke=True)
    assert nb.cells[1].source.startswith("SMOKE = True")
    assert nb.cells[2].outputs[0]["text"].strip() == "found"
    with pytest.raises(NotebookError, match="AssertionError"):
        run_notebook(path, smoke=False)


def test_runner_reports_the_failing_cell(tmp_path):
    path = _write(tmp_path, "SMOKE = False", "x = 1", "raise ValueError('boom in cell 3')")
    with pytest.raises(NotebookError, match="boom in cell 3"):
        run_notebook(path)


def test_runner_shuts_each_kernel_down_also_after_a_failing_cell(tmp_path):
    """nbclient keeps a kernel alive when it did not create the kernel manager: the runner must stop it, or
    every notebook a test session runs leaves a kernel (~0.5 GB) behind until pytest exits."""
    import psutil
    kernels = lambda: [p for p in psutil.Process().children(recursive=True) if "ipykernel" in " ".join(p.cmdline())]
    before = len(kernels())
    run_notebook(_write(tmp_path, "SMOKE = False", "x = 1"))
    with pytest.raises(NotebookError):
        run_notebook(_write(tmp_path, "SMOKE = False", "raise ValueError('boom')"))
    assert len(kernels()) == before


def test_replies_a_long_poll_would_miss_are_read_within_a_slice():
    """The nbclient stall (jupyter/nbclient#312): a channel whose poll misses the wake-up hands over a message that
    arrived early only when the poll times out. Read in slices, it is picked up within one slice, not the timeout."""
    import asyncio
    from queue import Empty
    from time import monotonic
    from toy_rl.notebook_runner import sliced

    arrived = monotonic() + 0.05

    async def missed_wakeup_get_msg(timeout):      # sleeps its whole timeout, then finds what arrived meanwhile
        await asyncio.sleep(timeout)
        if monotonic() >= arrived:
            return {"msg": "reply"}
        raise Empty

    start = monotonic()
    assert asyncio.run(sliced(missed_wakeup_get_msg, slice_s=0.1)(timeout=30)) == {"msg": "reply"}
    assert monotonic() - start < 5                      # one long poll would have taken the 30 s
    arrived = float("inf")                              # nothing ever arrives: Empty once the timeout has passed
    start = monotonic()
    with pytest.raises(Empty):
        asyncio.run(sliced(missed_wakeup_get_msg, slice_s=0.1)(timeout=0.35))
    assert 0.3 <= monotonic() - start < 5


def test_the_runners_client_reads_both_channels_in_slices(tmp_path):
    """Without the slicing the client waits in one long poll per cell (the stall); a guard that it is in place."""
    from toy_rl.notebook_runner import SlicedNotebookClient, this_python_kernel
    client = SlicedNotebookClient(nbformat.read(_write(tmp_path, "SMOKE = False"), as_version=4),
                                  km=this_python_kernel(), timeout=60)
    client.execute(cleanup_kc=False)
    try:
        for channel in (client.kc.shell_channel, client.kc.iopub_channel):
            assert channel.get_msg.__name__ == "get_msg_in_slices"
    finally:
        client._cleanup_kernel()


def test_nbconvert_execute_uses_the_sliced_executor(tmp_path):
    """Issue 31: `jupyter nbconvert --execute` (the venv's, configured by scripts/setup.sh) reads the replies in
    slices too; with the stock ExecutePreprocessor notebook 00 sat out minutes after its slider (11 s sliced)."""
    import json
    from nbconvert.exporters import NotebookExporter
    from traitlets.config import Config
    from toy_rl.nbconvert_client import SlicedExecutePreprocessor, write_config
    config = Config(json.loads(write_config(tmp_path).read_text()))
    config.ExecutePreprocessor.enabled = True                     # what --execute sets
    config.ExecutePreprocessor.kernel_name = "python3"
    running = [p for p in NotebookExporter(config=config)._preprocessors if getattr(p, "enabled", False)]
    assert [type(p) for p in running] == [SlicedExecutePreprocessor]
    pre, seen = running[0], []
    run_cell = pre.preprocess_cell

    def spy(cell, resources, index):                              # the channels as each cell runs
        seen.append({c.get_msg.__name__ for c in (pre.kc.shell_channel, pre.kc.iopub_channel)})
        return run_cell(cell, resources, index)
    pre.preprocess_cell = spy
    nb, _ = pre.preprocess(nbformat.read(_write(tmp_path, "SMOKE = False", "print(1)"), as_version=4),
                           {"metadata": {"path": str(tmp_path)}})
    assert nb.cells[1].outputs and seen == [{"get_msg_in_slices"}] * 2


def test_setup_sh_configures_nbconvert():
    setup = Path(__file__).resolve().parents[1] / "scripts" / "setup.sh"
    assert ".venv/bin/python -m toy_rl.nbconvert_client" in setup.read_text()


def test_runner_needs_a_parameters_cell(tmp_path):
    path = _write(tmp_path, "SMOKE = False", tag_first=False)
    with pytest.raises(NotebookError, match="parameters"):
        run_notebook(path)
    with pytest.raises(NotebookError, match="parameters"):
        with_smoke(nbformat.read(path, as_version=4))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids)
def test_setup_cell_reads_toy_rl_smoke_from_the_environment(path):
    nb = nbformat.read(path, as_version=4)
    setup = nb.cells[parameters_index(nb) + 1].source
    assert "SMOKE = smoke_requested(SMOKE)" in setup.split("if SMOKE", 1)[0]      # before anything uses SMOKE


@pytest.mark.parametrize("value, smoke", [("", False), ("0", False), ("1", True), ("yes", True)])
def test_smoke_requested(monkeypatch, value, smoke):
    from toy_rl.smoke import smoke_requested
    monkeypatch.setenv("TOY_RL_SMOKE", value)
    assert smoke_requested(False) is smoke and smoke_requested(True) is True


def test_smoke_requested_refuses_a_value_it_cannot_read(monkeypatch):
    from toy_rl.smoke import smoke_requested
    monkeypatch.setenv("TOY_RL_SMOKE", "maybe")
    with pytest.raises(ValueError, match="TOY_RL_SMOKE must be 1"):
        smoke_requested()


def test_nbconvert_with_toy_rl_smoke_runs_the_smoke_configuration(tmp_path):
    """What the course guide shows: TOY_RL_SMOKE=1 jupyter nbconvert --execute, no edit of the notebook."""
    import os
    import subprocess
    import sys
    path = _write(tmp_path, "SMOKE = False", "from toy_rl.smoke import smoke_requested\n"
                                             "SMOKE = smoke_requested(SMOKE)\nprint('SMOKE is', SMOKE)")
    out = tmp_path / "executed"
    env = dict(os.environ, TOY_RL_SMOKE="1")
    run = subprocess.run([sys.executable, "-m", "nbconvert", "--to", "notebook", "--execute",
                          "--ExecutePreprocessor.timeout=120", "--ExecutePreprocessor.kernel_name=python3",
                          "--output-dir", str(out), str(path)], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    executed = nbformat.read(out / path.name, as_version=4)
    assert executed.cells[1].outputs[0]["text"] == "SMOKE is True\n"


def test_runner_saves_the_executed_copy(tmp_path):
    from toy_rl.notebook_runner import main
    path = _write(tmp_path, "SMOKE = False", "print('smoke' if SMOKE else 'full')")
    assert main([str(path), "--save", str(tmp_path / "out")]) == 0
    saved = nbformat.read(tmp_path / "out" / path.name, as_version=4)
    assert saved.cells[-1].outputs[0]["text"] == "smoke\n"
    assert not nbformat.read(path, as_version=4).cells[-1].outputs          # the source stays without outputs


STOPPED = """
import sys
from toy_rl.errors import Terminated
from toy_rl.notebook_runner import run_notebook
try:
    run_notebook(sys.argv[1])
except Terminated:
    print("terminated", flush=True)
"""


def test_sigterm_stops_a_notebook_run_and_its_kernel(tmp_path):
    """Issue 30: nbclient's own SIGTERM handler shut the kernel down and let `toy-rl course check` go on (~95 s)
    into an AssertionError traceback. Now SIGTERM cancels the run: Terminated, and no kernel is left behind."""
    import signal
    import subprocess
    import sys
    import time
    import psutil
    started = tmp_path / "started"
    path = _write(tmp_path, "SMOKE = False", f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\n"
                                             "time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", STOPPED, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the notebook did not start"
            time.sleep(0.1)
        kernels = [p for p in psutil.Process(proc.pid).children(recursive=True) if "ipykernel" in " ".join(p.cmdline())]
        assert kernels
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert out.strip() == "terminated" and time.monotonic() - t0 < 30
        assert not [k for k in kernels if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]
    finally:
        proc.kill()
