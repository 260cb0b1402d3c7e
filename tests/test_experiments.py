"""The one runner's pieces that every rung shares (toy_rl.experiments): the folder layout, the task registry by
rung, RunSpec/make_spec/grid, reading runs back, the summary table with paired tests by seed, the thread helper.
The rung backends are tested end to end in test_bandit_experiments.py, test_arithmetic.py and test_lm_run.py."""
import json
import math

import numpy as np
import pytest
import torch
from scipy import stats

from toy_rl.experiments import (RULES, area_under, experiment_name, format_table, grid, load, make_spec, make_task,
                                run_dir, run_summary, scenario_name, summarize, task_label, task_names)
from toy_rl.experiments.runner import finished
from toy_rl.experiments.table import default_columns
from toy_rl.threads import cpu_threads, single_thread


# --- layout and tasks --------------------------------------------------------------------------------------

def test_scenario_names_and_folders_of_every_rung(tmp_path):
    assert scenario_name() == "on-policy" and scenario_name(0, "lag") == "on-policy"
    assert scenario_name(4) == "reuse-4" and scenario_name(2, "lag") == "lag-2"
    assert scenario_name(0, partial=8) == "partial-8"
    assert experiment_name("bandit", "rare-correct") == "bandit-rare-correct"
    assert experiment_name("arithmetic", "add", smoke=True) == "arithmetic-add-smoke"
    assert experiment_name("lm", "add", "/models/Qwen2.5-7B-Instruct") == "Qwen2.5-7B-Instruct-add"
    s = make_spec("arithmetic", "countdown", rule="clip-higher", staleness=2, mode="lag", seed=3, out=tmp_path)
    assert run_dir(s) == tmp_path / "arithmetic-countdown" / "lag-2" / "clip-higher" / "seed3"
    assert run_dir(s.replace(run_dir=tmp_path / "mine")) == tmp_path / "mine"


def test_the_task_registry_keeps_the_rungs_apart():
    rung2, rung3 = make_task("arithmetic", "add"), make_task("lm", "add")
    assert type(rung2) is not type(rung3)                            # the same name, two different tasks
    assert rung2.sample(1, 0)[0].prompt.endswith("=") and "\n" in rung3.sample(1, 0)[0].prompt   # 3-shot prompt
    assert task_label("arithmetic", rung2) == task_label("lm", rung3) == "add"
    assert "add" in task_names("arithmetic") and "add3" in task_names("lm") and "rare-correct" in task_names("bandit")
    assert task_label("lm", make_task("lm", "add", "chat")) == "add-chat"
    for rung, name in (("bandit", "add"), ("arithmetic", "add3"), ("lm", "countdown")):
        with pytest.raises(ValueError, match="unknown task"):
            make_task(rung, name)
    with pytest.raises(ValueError, match="rung must be one of"):
        make_task("rung2", "add")


# --- specs ------------------------------------------------------------------------------------------------

def test_make_spec_fills_the_backend_defaults_and_routes_settings():
    s = make_spec("arithmetic", "add", rule="bapo", staleness=4, lr=1e-3, threads=None, warmstart=None)
    assert (s.rl.steps, s.rl.prompts, s.rl.lr, s.rl.staleness, s.threads) == (200, 16, 1e-3, 4, None)
    assert s.rl.max_new_tokens == make_task("arithmetic", "add").max_answer_chars + 1   # the task decides
    assert make_spec("arithmetic", smoke=True, steps=50).rl.steps == 6                # smoke caps steps
    assert make_spec("bandit").rl.steps == 300 and make_spec("bandit", n_tokens=8).option("n_tokens") == 8
    assert make_spec("bandit").option("n_tokens") == 32
    assert make_spec("lm").rl.steps == 40 and make_spec("lm").model == "smollm2-135m"
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['n_tokens'\]"):
        make_spec("arithmetic", n_tokens=8)                         # rung 1's option, not rung 2's
    with pytest.raises(ValueError, match="threads"):
        make_spec("arithmetic", threads=0)
    with pytest.raises(ValueError, match="preset is for rungs 3-4"):
        make_spec("arithmetic", preset="qwen2.5-7b")
    with pytest.raises(ValueError, match="rung must be one of"):
        make_spec("tabular")


def test_grid_is_every_scenario_and_rule_by_seed():
    specs = grid("arithmetic", "add", RULES, (0, 4), range(2), partial=8)
    cells = [(scenario_name(s.rl.staleness, s.rl.mode, s.rl.partial), s.rl.rule, s.rl.seed) for s in specs]
    assert cells == [(sc, r, k) for sc in ("on-policy", "reuse-4", "partial-8") for r in RULES for k in (0, 1)]
    with pytest.raises(ValueError, match="at least one rule"):
        grid("arithmetic", rules=())
    with pytest.raises(ValueError, match="staleness"):
        grid("arithmetic", stalenesses=(0, -1))


# --- reading runs back -------------------------------------------------------------------------------------

def _log(folder, records, config=None):
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))


def _records(accuracies, entropy=1.0, rule="bapo"):
    """A logged run: evaluations at steps 0, 1, ... (the last one final), one update between each."""
    recs = [dict(step=i, rule=rule, staleness=2, accuracy=a, entropy=entropy, c_low=0.8, c_high=1.2, grad_norm=1.0,
                 reward_mean=a) for i, a in enumerate(accuracies[:-1])]
    return recs + [dict(step=len(accuracies) - 1, rule=rule, staleness=2, final=True, accuracy=accuracies[-1])]


def test_load_reads_seeds_in_numeric_order(tmp_path):
    for seed in (10, 2, 0):
        _log(tmp_path / "reuse-2" / "bapo" / f"seed{seed}", _records([0.1, seed / 100]))
    _log(tmp_path / "reuse-2" / "bapo" / "notes", _records([0.1, 0.5]))           # not a seed folder
    loaded = load(tmp_path)
    assert [recs[0]["seed"] for recs in loaded["reuse-2", "bapo"]] == [0, 2, 10]
    assert [recs[-1]["accuracy"] for recs in loaded["reuse-2", "bapo"]] == [0.0, 0.02, 0.1]
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nowhere")


def test_a_finished_run_is_recognised_only_with_its_own_config(tmp_path):
    spec = make_spec("arithmetic", "add", rule="bapo", staleness=2, steps=3, out=tmp_path)
    records = _records([0.1, 0.2, 0.3, 0.4])
    _log(run_dir(spec), records, spec.rl.to_dict())
    assert finished(spec) == records
    assert finished(spec.replace(lr=1e-2)) is None                                 # another config
    assert finished(spec.replace(steps=5)) is None                                 # a longer run: not done yet
    (run_dir(spec) / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[:-1]))
    assert finished(spec) is None                                                  # interrupted: no final record


# --- the summary table -------------------------------------------------------------------------------------

def test_summarize_bands_and_pairs_by_seed():
    sym = [_records([0.1, 0.30 + d], rule="symmetric") for d in (0.00, 0.10, 0.20, 0.05)]
    bapo = [_records([0.1, 0.35 + d], rule="bapo") for d in (0.00, 0.12, 0.19, 0.07)]
    for i, (a, b) in enumerate(zip(sym, bapo)):
        for r in a + b:
            r["seed"] = [3, 1, 0, 2][i]
    # the baseline's seeds in another order: pairs are matched by seed, not by position
    results = {("reuse-2", "symmetric"): sym[::-1], ("reuse-2", "bapo"): bapo}
    rows = summarize(results)
    base, row = rows
    final_b, final_s = [r[-1]["accuracy"] for r in bapo], [r[-1]["accuracy"] for r in sym]
    t_ci = stats.t.interval(0.95, 3, loc=np.mean(final_b), scale=stats.sem(final_b))
    assert row["final_accuracy"] == pytest.approx(np.mean(final_b))
    assert (row["final_accuracy_lo"], row["final_accuracy_hi"]) == pytest.approx(t_ci)
    assert row["p_vs_symmetric"] == pytest.approx(stats.ttest_rel(final_b, final_s).pvalue)
    assert row["p_vs_symmetric"] < stats.ttest_ind(final_b, final_s, equal_var=False).pvalue    # pairing helps here
    assert row["diff_vs_symmetric"] == pytest.approx(np.mean(np.subtract(final_b, final_s))) and row["pairs"] == 4
    auc_b = [area_under([[0, 0.1], [1, a]]) for a in final_b]
    assert row["auc_accuracy"] == pytest.approx(np.mean(auc_b)) and auc_b[0] == pytest.approx((0.1 + 0.35) / 2)
    assert row["start_accuracy"] == pytest.approx(0.1) and row["entropy"] == 1.0 and row["seeds"] == 4
    assert base["p_vs_symmetric"] is None and base["diff_vs_symmetric"] is None
    json.dumps(rows, allow_nan=False)                                 # strict JSON: no NaN anywhere


def test_format_table_headers_whole_and_one_seed_is_na():
    rows = summarize({("on-policy", "symmetric"): [_records([0.2, 0.4], rule="symmetric")],
                      ("on-policy", "bapo"): [_records([0.2, 0.5])]})
    assert rows[1]["final_accuracy_lo"] is None and rows[1]["p_vs_symmetric"] is None      # one seed: no band, no test
    text = format_table(rows)
    head = text.splitlines()[0].split()
    assert "start_accuracy" in head and "final_accuracy" in head and "clip_frac_high" in head
    assert set(head) == set(default_columns(rows))
    assert "0.500 ± n/a" in text and "nan" not in text
    assert format_table(rows, ["rule", "final_accuracy"]).splitlines()[2].split() == ["bapo", "0.500", "±", "n/a"]


def test_run_summary_of_a_logged_run():
    s = run_summary(_records([0.1, 0.3, 0.2, 0.6]))
    assert (s["start_accuracy"], s["final_accuracy"], s["best_accuracy"]) == (0.1, 0.6, 0.6)
    assert s["updates"] == 3 and s["finished"] and s["accuracy_curve"][-1] == [3, 0.6]
    assert s["auc_accuracy"] == pytest.approx(((0.1 + 0.3) / 2 + (0.3 + 0.2) / 2 + (0.2 + 0.6) / 2) / 3)
    assert math.isclose(s["reward_mean"], 0.2)


# --- threads ----------------------------------------------------------------------------------------------

def test_cpu_threads_sets_and_restores():
    before = torch.get_num_threads()
    with cpu_threads(1):
        assert torch.get_num_threads() == 1
        with single_thread():
            assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with cpu_threads(None):
        assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads"):
        with cpu_threads(0):
            pass
