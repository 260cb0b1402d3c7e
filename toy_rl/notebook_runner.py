"""Execute a notebook headless, as CI and ``tests/test_notebooks.py`` do.

    from toy_rl.notebook_runner import run_notebook
    nb = run_notebook("notebooks/00_clipping.ipynb", smoke=True)

Smoke mode follows papermill's convention: a cell ``SMOKE = True`` is inserted
right after the cell tagged "parameters", so the notebook can shrink its sizes.
The kernel is this interpreter's own ipykernel (``sys.executable``), whatever
kernelspecs happen to be installed elsewhere: notebooks run in the venv that
runs the tests.

The client waits for each cell's reply in short polls (``SlicedNotebookClient``):
nbclient's single long poll sometimes misses the reply of a cell that shows a
widget and then sits out the whole cell timeout (jupyter/nbclient#312), which
made CI wait 10 minutes at a time.
"""
from __future__ import annotations

import asyncio
import re
import signal
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from queue import Empty
from time import monotonic

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbclient.util import ensure_async, run_sync

from .errors import Terminated

SMOKE_SOURCE = "SMOKE = True  # inserted by toy_rl.notebook_runner (smoke mode)"


class NotebookError(RuntimeError):
    """A notebook could not be run: no parameters cell, or a cell raised (the message holds its error)."""


def parameters_index(nb) -> int:
    """Index of the cell tagged "parameters"; NotebookError if there is none (or more than one)."""
    hits = [i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(hits) != 1:
        raise NotebookError(f"expected exactly one cell tagged 'parameters' (papermill convention); found {len(hits)}")
    return hits[0]


def with_cell(nb, source: str):
    """A copy of ``nb`` with a code cell ``source`` (tagged "injected-parameters") right after its parameters cell:
    papermill's way of setting parameters without editing the notebook."""
    nb = nbformat.from_dict(nb)
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    nb.cells.insert(parameters_index(nb) + 1, cell)
    return nb


def with_smoke(nb):
    """A copy of ``nb`` with ``SMOKE = True`` inserted right after its parameters cell."""
    return with_cell(nb, SMOKE_SOURCE)


POLL_SLICE_S = 1.0


def sliced(get_msg, slice_s: float = POLL_SLICE_S):
    """``get_msg`` (a channel read, blocking or async) waiting in polls of at most ``slice_s`` seconds up to its timeout.

    zmq's asyncio poll can miss the wake-up for a message that has already arrived; the message is then picked up
    only when the poll times out, so one long poll (nbclient waits the whole cell timeout in one) turns a reply
    sent in under a second into a wait of the full timeout. Short polls pick it up within ``slice_s``."""
    async def get_msg_in_slices(timeout=None):
        deadline = None if timeout is None else monotonic() + timeout
        while True:
            left = slice_s if deadline is None else max(0.0, deadline - monotonic())
            try:
                return await ensure_async(get_msg(timeout=min(slice_s, left)))
            except Empty:
                if deadline is not None and monotonic() >= deadline:
                    raise
                await asyncio.sleep(0)          # a blocking read never yields: let the loop run (signals, other reads)
    return get_msg_in_slices


def _no_signal_handlers(sig, callback, *args):
    raise RuntimeError("toy_rl.notebook_runner sets the signal handlers itself")


class SlicedChannels:
    """Mixin for an nbclient client: the kernel's shell and iopub replies read in short polls (:func:`sliced`)."""

    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        for channel in (kc.shell_channel, kc.iopub_channel):
            channel.get_msg = sliced(channel.get_msg)
        return kc

    def start_new_kernel_client(self):
        """The sync entry (nbconvert's ``setup_kernel``): nbclient binds it to its own async method, not ours."""
        return run_sync(self.async_start_new_kernel_client)()


class SlicedNotebookClient(SlicedChannels, NotebookClient):
    """nbclient's client with the kernel's replies and outputs read in short polls (see ``sliced``): no stall after
    widget cells.

    nbclient also sets SIGINT/SIGTERM handlers that shut the kernel down and let the run go on into an
    AssertionError (a first SIGTERM seemed ignored for ~95 s, then a traceback). Here either signal cancels the
    run: the kernel is shut down on the way out, the program's own handlers are put back, and
    :func:`run_notebook` raises KeyboardInterrupt (Ctrl-C) or :class:`toy_rl.errors.Terminated` (SIGTERM), so
    ``toy-rl`` prints one line as for any run it stops."""

    stopped_by = None

    @asynccontextmanager
    async def async_setup_kernel(self, **kwargs):
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        loop.add_signal_handler = _no_signal_handlers          # nbclient skips its own on RuntimeError
        try:
            async with super().async_setup_kernel(**kwargs):
                del loop.add_signal_handler
                for sig in before:
                    loop.add_signal_handler(sig, self._stop, sig, task)
                yield
        finally:
            vars(loop).pop("add_signal_handler", None)
            for sig, handler in before.items():
                loop.remove_signal_handler(sig)
                signal.signal(sig, handler)

    def _stop(self, sig, task) -> None:
        self.stopped_by = sig
        task.cancel()


def this_python_kernel() -> KernelManager:
    """A kernel manager for ipykernel in *this* interpreter: jupyter_client's built-in "python3" spec
    launches ``sys.executable`` when no kernel directory is searched (no kernelspec install needed). Its channels
    block (plain zmq polls); read in one-second slices (:func:`sliced`) they hand the event loop back every
    second, so a signal still stops a quiet cell."""
    return KernelManager(kernel_name="python3", kernel_spec_manager=KernelSpecManager(kernel_dirs=[]))


def run_notebook(path, smoke: bool = True, timeout: int = 600, inject: str | None = None):
    """Execute the notebook at ``path`` top to bottom, in its own folder; return the executed notebook.

    ``smoke``: insert ``SMOKE = True`` after the "parameters" cell (which must exist).
    ``inject``: source of a cell inserted there instead (parameters set without editing the notebook).
    ``timeout``: seconds allowed per cell. Raises NotebookError naming the failing cell and its error.
    """
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    if inject is not None:
        nb = with_cell(nb, inject)
    elif smoke:
        nb = with_smoke(nb)
    client = SlicedNotebookClient(nb, km=this_python_kernel(), timeout=timeout,
                            resources={"metadata": {"path": str(path.parent.resolve())}})
    try:
        try:
            client.execute(cleanup_kc=True)      # shut the kernel down after: nbclient keeps one it did not create
        except BaseException:                    # a signal cancelled the run (nbclient may call it DeadKernelError)
            if client.stopped_by is not None:
                raise (Terminated if client.stopped_by == signal.SIGTERM else KeyboardInterrupt)() from None
            raise
    except CellExecutionError as err:
        message = re.sub(r"\x1b\[[0-9;]*m", "", str(err))          # drop the traceback's colour codes
        raise NotebookError(f"{path.name} failed (smoke={smoke}):\n{message}") from None
    return nb


def main(argv=None) -> int:
    """``python -m toy_rl.notebook_runner [--full] [--save DIR] [--timeout S] [NOTEBOOK ...]``: run the notebooks
    (default: every notebooks/*.ipynb) in smoke mode (``--full``: as they are), and with ``--save`` write each
    executed copy, outputs included, into DIR (the committed notebooks stay without outputs)."""
    import argparse
    parser = argparse.ArgumentParser(prog="python -m toy_rl.notebook_runner", description=main.__doc__)
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--full", action="store_true", help="run the full configuration, not smoke mode")
    parser.add_argument("--save", type=Path, default=None, metavar="DIR", help="write the executed copies here")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (default %(default)s)")
    args = parser.parse_args(argv)
    for path in args.notebooks or sorted(Path("notebooks").glob("*.ipynb")):
        start = monotonic()
        nb = run_notebook(path, smoke=not args.full, timeout=args.timeout)
        if args.save is not None:
            args.save.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, args.save / path.name)
        print(f"ok  {path} ({monotonic() - start:.0f} s)"
              + (f" -> {args.save / path.name}" if args.save is not None else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
