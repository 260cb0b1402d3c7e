"""The course, readable without running it: every notebook executed in full mode from committed run logs.

    toy-rl course collect        # copy the logs the full notebooks read (metrics.jsonl, config.json) runs/ -> results/
    toy-rl course build          # execute notebooks/*.ipynb in full mode from results/ into docs/course/
    toy-rl course check          # execute them again and compare with docs/course/ (what tests/test_course.py does)

Nothing trains while building or checking: the runner reads the finished runs in ``results/`` and refuses to
train a missing one (``TOY_RL_LOGGED_ONLY=1``, :data:`toy_rl.experiments.runner.LOGGED_ONLY`). Rung 1's bandit
sweeps are simulated in the notebooks themselves (seconds), as are the demos that use a cached warm start.

Files: logs (which run folders are committed, and copying them), execute (running a notebook from the logs),
outputs (making an executed copy small and comparable, and comparing two).
"""
from .execute import build, check, execute_from_logs
from .logs import COURSE, NOTEBOOKS, RESULTS, collect

__all__ = ["COURSE", "NOTEBOOKS", "RESULTS", "build", "check", "collect", "execute_from_logs"]
