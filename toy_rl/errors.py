"""Errors a user can cause and fix, that the command line prints as one line (exit 2) rather than a traceback.

Kept apart from the modules that raise them so that ``toy_rl/cli.py`` can name them without importing torch.
"""


class FolderInUse(RuntimeError):
    """Another process holds the run folder (:func:`toy_rl.rl.run_folder.lock_run`)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, like Ctrl-C, so that it unwinds the same way (locks released, the
    run resumable, worker processes and notebook kernels stopped); ``toy-rl`` prints one line, exit 143."""
