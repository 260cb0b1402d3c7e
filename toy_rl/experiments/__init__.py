"""One experiment runner for every rung: describe a run with one config, run it, sweep, read back, summarize.

    from toy_rl.experiments import RULES, format_table, grid, load, make_spec, run, summarize, sweep
    spec = make_spec("arithmetic", "add", rule="bapo", staleness=4, seed=0)    # a RunSpec: rung-level
    records = run(spec)                                                       #   fields + its RLConfig
    results = sweep(grid("bandit", rules=RULES, stalenesses=(0, 2, 4, 8), seeds=range(20)))
    print(format_table(summarize(results)))     # final score and area under the curve, 95% bands,
                                                # paired t-test by seed against symmetric
    results = load("runs/bandit-rare-correct")  # the same dict, read back from the run folders

Files: spec (RunSpec, make_spec, grid), tasks (the task registry, by rung), layout (the run folders),
runner (run, sweep, load), records (one run's curves and numbers), table (summarize, format_table),
plan (what a command is about to train, and how long: Plan). The rung backends stay in their packages:
toy_rl.bandit.experiments (rung 1), toy_rl.arithmetic.run (rung 2), toy_rl.lm.run (rungs 3-4) train; each rung's
``backend`` module (toy_rl.arithmetic.backend, ...) says what a plan asks about it (its measured rates).
"""
from .layout import experiment_dir, experiment_name, model_label, rule_label, run_dir, scenario_name
from .records import SCORES, UPDATE_METRICS, area_under, curve, run_summaries, run_summary, score_name
from .logged import set_train, train_mode
from .runner import finished, load, read_back, read_dir, run, status, sweep
from .spec import RULES, RunSpec, backend, grid, make_spec, scenarios
from .table import DIAGNOSTICS, format_table, summarize
from .tasks import RUNGS, make_task, task_label, task_names

__all__ = ["DIAGNOSTICS", "RULES", "RUNGS", "SCORES", "UPDATE_METRICS", "RunSpec", "area_under", "backend", "curve",
           "experiment_dir", "experiment_name", "finished", "format_table", "grid", "load", "make_spec", "make_task",
           "model_label", "read_back", "read_dir", "rule_label", "run", "run_dir", "run_summaries", "run_summary",
           "scenario_name", "scenarios", "score_name", "set_train", "status", "summarize", "sweep", "task_label",
           "task_names", "train_mode"]
