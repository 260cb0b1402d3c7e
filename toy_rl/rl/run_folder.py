"""A run folder that cannot be corrupted or hijacked: atomic files, safe loading, one writer at a time.

Every file a resume reads is written whole or not at all (:func:`save_state`,
:func:`write_text`: a temporary file in the same folder, flushed to disk, then
``os.replace``), so a crash or Ctrl-C never leaves half a checkpoint. Saved state
holds only tensors and plain Python values, and :func:`load_state` reads it with
``torch.load(weights_only=True)``: a crafted ``checkpoint.pt`` cannot run code on
resume, and a damaged one is a one-line ValueError naming the file, never a
raw traceback. :func:`lock_run` keeps a second process out of a folder in use.

    with lock_run(out):                      # RuntimeError if another process holds it
        save_state(out / "checkpoint.pt", {"step": 3, "weights": {...}})
        state = load_state(out / "checkpoint.pt")
"""
from __future__ import annotations

import contextlib
import errno
import os
import pickle
import re
import shutil
import zipfile
from collections import OrderedDict
from pathlib import Path

import torch

from ..errors import FolderInUse

try:                                     # POSIX; elsewhere the folder lock is a no-op
    import fcntl
except ImportError:                      # pragma: no cover
    fcntl = None

PLAIN = (str, int, float, bool, bytes, type(None), torch.Tensor, torch.dtype, torch.Size)
LOCK_NAME = ".lock"


def check_plain(obj, where: str = "state") -> None:
    """ValueError unless ``obj`` is made only of tensors and plain values (dict, list, tuple, str, numbers,
    None): what ``torch.load(weights_only=True)`` reads back. ``where`` names the part in the message."""
    if type(obj) in (dict, OrderedDict):
        for k, v in obj.items():
            if type(k) not in (str, int):
                raise ValueError(f"{where} has a key of type {type(k).__name__}; only str/int keys can be saved")
            check_plain(v, f"{where}[{k!r}]")
    elif type(obj) in (list, tuple):
        for i, v in enumerate(obj):
            check_plain(v, f"{where}[{i}]")
    elif not (type(obj) in PLAIN or isinstance(obj, torch.Tensor)):
        raise ValueError(f"{where} is a {type(obj).__module__}.{type(obj).__qualname__}; saved state may hold only "
                         "tensors and plain values (dict, list, tuple, str, int, float, bool, None)")


def _replace_atomically(path: Path, write) -> Path:
    """``write(tmp)`` to a temporary file beside ``path``, fsync it, then rename it over ``path``: ``path`` holds
    the old contents or the new, never half. A full disk is OSError ENOSPC naming ``path`` (torch.save reports it
    as a RuntimeError "file write failed", without the cause)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:         # Ctrl-C included: never leave the temporary file behind
        tmp.unlink(missing_ok=True)
        if isinstance(err, (OSError, RuntimeError)) and _disk_full(err, path.parent):
            raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (nothing was written; the old file, if "
                                        "any, is intact)", str(path)) from None
        raise
    with contextlib.suppress(OSError):   # make the rename itself durable (not possible everywhere)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return path


def save_state(path, obj) -> Path:
    """``torch.save`` ``obj`` to ``path`` atomically. ValueError (nothing written) if ``obj`` holds anything
    but tensors and plain values, since :func:`load_state` could not read it back."""
    check_plain(obj)
    return _replace_atomically(path, lambda tmp: torch.save(obj, tmp))


def write_text(path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (e.g. ``config.json``, a truncated ``metrics.jsonl``)."""
    return _replace_atomically(path, lambda tmp: Path(tmp).write_text(text))


def load_state(path, classes=()):
    """What :func:`save_state` wrote, on the CPU, read with ``weights_only=True`` (no code can run).

    ValueError naming the file if it is missing, empty, truncated or not a torch file, or if it holds
    Python objects other than tensors and plain values (a file from elsewhere, or from a toy_rl version
    that pickled objects): such a file is refused, not loaded. ``classes``: plain data classes (no code
    in their construction) that may also appear, e.g. to read files written before saved state was plain.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no saved state at {path}")
    if path.stat().st_size == 0:
        raise ValueError(f"{path} is empty (an interrupted write?); delete it, or start the run over")
    try:
        with torch.serialization.safe_globals(list(classes)):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        found = re.search(r"GLOBAL ([\w.]+)", str(e))
        if found:
            raise ValueError(f"{path} holds Python objects other than tensors and plain values ({found[1]}) and "
                             "was refused (loading it could run code); if you did not write it, delete it; if an "
                             "older toy_rl wrote it, start the run over") from None
        raise ValueError(f"{path} is truncated or corrupt, or a pickle toy_rl cannot read safely, and was not "
                         "loaded; delete it, or start the run over") from None
    except (RuntimeError, EOFError, KeyError, OSError, zipfile.BadZipFile, ValueError) as e:
        raise ValueError(f"{path} is truncated or corrupt ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}); "
                         "delete it, or start the run over") from None


# -------------------------------------------------------------------------------------------- the lock

_held: dict = {}                         # (pid, folder) -> [open lock file, depth]: re-entrant within a process


def remove_leftovers(folder) -> list[Path]:
    """Delete the temporary files of writes that a killed process left in ``folder`` (``.<name>.tmp<pid>``, see
    :func:`_replace_atomically`; a SIGKILL skips its clean-up). Only safe while holding the folder's lock."""
    gone = sorted(Path(folder).glob(".*.tmp[0-9]*"))
    for path in gone:
        path.unlink(missing_ok=True)
    return gone


def _disk_full(err: BaseException, folder: Path) -> bool:
    """Did ``err`` come from a full disk? ENOSPC, or a failed write with (almost) no space left in ``folder``."""
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    try:
        return shutil.disk_usage(folder).free < 1 << 20      # torch's own messages vary ("iostream error", ...)
    except OSError:
        return False


@contextlib.contextmanager
def lock_run(folder):
    """Hold ``<folder>/.lock`` (``fcntl.flock``, exclusive, non-blocking) for the ``with`` block.

    A second process gets :class:`FolderInUse` (a RuntimeError) "run folder X is in use by another process
    (pid N)" at once. Once held, temporary files an interrupted write left behind are removed.
    The OS releases the lock when its holder dies, so a killed run never blocks the next one. Re-entrant
    in one process (a caller may hold the folder around :func:`toy_rl.rl.loop.train`, which locks it too).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    key = (os.getpid(), str(folder.resolve()))
    if key in _held:
        _held[key][1] += 1
        try:
            yield folder
        finally:
            _held[key][1] -= 1
        return
    f = open(folder / LOCK_NAME, "a+")   # not "w": never truncate the holder's pid before we hold the lock
    try:
        if fcntl is not None:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.seek(0)
                holder = f.read().strip() or "unknown"
                raise FolderInUse(f"run folder {folder} is in use by another process (pid {holder}); wait for it "
                                  "to finish, or use another folder") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        remove_leftovers(folder)
        _held[key] = [f, 1]
        try:
            yield folder
        finally:
            del _held[key]
            if fcntl is not None:
                fcntl.flock(f, fcntl.LOCK_UN)
    finally:
        f.close()
