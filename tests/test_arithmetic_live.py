"""toy_rl.arithmetic.live and its view (notebook 04 §13): the sliders' rule, a short run from the warm start
that retraces a logged run at that run's own bounds, the logged baseline found (or trained when missing), the
cache, and the widget's redraw when Run is pressed. Tiny models and a handful of updates: seconds in all."""
from dataclasses import dataclass

import pytest
import torch
from matplotlib.figure import Figure

from toy_rl.arithmetic.live import (BAPO_HIGH_MAX, BAPO_LOW_MAX, LiveRuns, describe_rule, find_logged,
                                    live_baseline, live_config, live_rule, matching_logged, max_gap, short_run,
                                    truncate, warmstart_line)
from toy_rl.arithmetic.model.gpt import ModelConfig
from toy_rl.arithmetic.policy import TinyPolicy
from toy_rl.arithmetic.tasks import AddTask
from toy_rl.arithmetic.views.live import LIVE_CLASS, live_rows, live_summary, live_view, live_widget
from toy_rl.arithmetic.warmstart import WarmstartConfig, load_warmstart
from toy_rl.clipping import BAPO, ClipHigher, FixedBounds, Symmetric
from toy_rl.experiments import experiment_name
from toy_rl.rl.loop import RLConfig, train

TINY = WarmstartConfig(model=ModelConfig(n_layer=1, n_head=2, d_model=32, block_size=64), max_steps=20,
                       batch_size=16, warmup_steps=5, eval_every=10, eval_problems=16, heldout_problems=16)
SETTINGS = dict(prompts=2, group_size=4, eval_every=3, eval_size=8)


@dataclass(frozen=True)
class EvenLength(AddTask):
    """"add" whose reward is 1 for an answer of even length: the tiny model earns it about half the time, so
    groups carry advantages, the updates move the policy and the rules differ."""
    name = "even-length"

    def reward(self, problem, completion):
        return float(len(completion) % 2 == 0)


@pytest.fixture(scope="module", autouse=True)
def _cache(module_cache):
    yield


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """The three rules logged at reuse-2, 6 updates each, seeds 0 and 1, as `toy-rl arithmetic` lays them out."""
    root = tmp_path_factory.mktemp("runs")
    task = EvenLength()
    for rule in ("symmetric", "clip-higher", "bapo"):
        for seed in (0, 1):
            cfg = RLConfig(rule=rule, staleness=2, steps=6, seed=seed, checkpoint_every=6,
                           max_new_tokens=task.max_answer_chars + 1, **SETTINGS)
            folder = root / experiment_name("arithmetic", task.name) / "reuse-2" / rule / f"seed{seed}"
            train(cfg, TinyPolicy(load_warmstart(task, TINY, progress=False)), task, folder, progress=False)
    return root


def test_live_rule_names_the_logged_rules_and_builds_the_rest():
    assert live_rule("fixed", 0.8, 1.2) == Symmetric() and type(live_rule("fixed", 0.8, 1.2)) is Symmetric
    assert type(live_rule("fixed", 0.8, 1.2800000000000002)) is ClipHigher      # a slider's float noise
    assert live_rule("fixed", 0.7, 1.5) == FixedBounds(lo=0.7, hi=1.5)
    assert live_rule("bapo", 0.6, 1.2, 0.4) == BAPO()
    moved = live_rule("bapo", 0.5, 1.3, 0.55)
    assert moved == BAPO(rho0=0.55, low_range=(0.5, BAPO_LOW_MAX), high_range=(1.3, BAPO_HIGH_MAX))
    capped = live_rule("bapo", 0.95, 3.5, 0.5)                                 # a start above the caps stays put
    assert capped.low_range == (0.95, 0.95) and capped.high_range == (3.5, 3.5) and capped.path() == [(0.95, 3.5)]
    assert describe_rule(live_rule("fixed", 0.8, 1.2)) == "symmetric [0.80, 1.20]"
    assert describe_rule(live_rule("fixed", 0.7, 1.5)) == "fixed [0.70, 1.50]"
    assert describe_rule(moved) == "bapo (ρ0 0.55, from [0.5, 1.3])"
    with pytest.raises(ValueError, match="kind"):
        live_rule("clip-higher", 0.8, 1.28)


def test_live_config_takes_the_logged_settings_but_the_rule_length_and_seed():
    saved = RLConfig(rule="symmetric", staleness=4, steps=60, prompts=16, lr=1e-3, seed=2).to_dict()
    cfg = live_config(BAPO(rho0=0.5), 25, 0, "add", saved)
    assert (cfg.staleness, cfg.prompts, cfg.lr, cfg.steps, cfg.seed, cfg.checkpoint_every) == (4, 16, 1e-3, 25, 0, 25)
    assert cfg.rule_label == "bapo-rho0.5"
    default = live_config("symmetric", 10, task="add", staleness=2)
    assert (default.prompts, default.group_size, default.staleness, default.max_new_tokens) == (16, 8, 2, 4)


def test_truncate_ends_like_a_shorter_run():
    recs = [{"step": s, "reward_mean": s, **({"accuracy": s / 10} if s % 3 == 0 else {})} for s in range(6)]
    recs.append({"step": 6, "final": True, "accuracy": 0.9})
    cut = truncate(recs, 3)
    assert [r["step"] for r in cut] == [0, 1, 2, 3] and cut[-1] == {"step": 3, "rule": None, "staleness": None,
                                                                      "final": True, "accuracy": 0.3}
    assert truncate(recs, 6)[-1]["accuracy"] == 0.9 and len(truncate(recs, 6)) == 7
    assert not any(r.get("final") for r in truncate(recs, 4))             # no accuracy measured at 4


def test_short_run_retraces_the_logged_run_at_its_bounds(logged):
    base = find_logged([logged / "nothing", logged], EvenLength(), staleness=2, updates=3)
    assert base is not None and base.logged and base.scenario == "reuse-2" and base.updates == 3
    assert sorted(base.runs) == ["bapo", "clip-higher", "symmetric"] and all(len(v) == 2 for v in base.runs.values())
    assert base.config["prompts"] == 2 and "rule" not in base.config and "seed" not in base.config
    assert "first 3 of 6 updates" in base.source
    base.warmstart = TINY
    live = LiveRuns(base)
    for kind, c_low, c_high, name in (("fixed", 0.8, 1.2, "symmetric"), ("fixed", 0.8, 1.28, "clip-higher"),
                                      ("bapo", 0.6, 1.2, "bapo")):
        result = live.run(kind, c_low, c_high, 0.4)
        assert matching_logged(result, base) == name
        assert len(result.records) == 4 and result.records[-1]["final"] and result.records[-1]["step"] == 3
        assert max_gap(result.records, base.runs[name][0]) == 0.0               # the same run, update by update
        assert result.records[-1]["accuracy"] == base.runs[name][0][-1]["accuracy"]
    other = live.run("fixed", 0.5, 1.05)
    assert matching_logged(other, base) is None and not other.cached and other.seconds > 0
    assert max_gap(other.records, base.runs["symmetric"][0], ("clip_frac_low", "clip_frac_high", "c_low")) > 0
    again = live.run("fixed", 0.5, 1.05)
    assert again.cached and again.seconds == 0 and again.records is other.records


def test_live_baseline_trains_a_short_one_without_logged_runs(tmp_path):
    base = live_baseline([tmp_path], EvenLength(), staleness=1, updates=2, seeds=1, warmstart=TINY, **SETTINGS)
    assert not base.logged and "trained now" in base.source and base.config["staleness"] == 1
    assert all(len(v) == 1 and v[0][-1]["final"] for v in base.runs.values())
    direct = short_run("symmetric", TINY, 2, 0, EvenLength(), staleness=1, **SETTINGS)
    assert max_gap(direct, base.runs["symmetric"][0]) == 0.0


def test_live_baseline_skips_logged_runs_with_other_settings(logged):
    base = live_baseline([logged], EvenLength(), staleness=2, updates=3, seeds=1, warmstart=TINY,
                         **dict(SETTINGS, prompts=3))
    assert not base.logged and base.config["prompts"] == 3


def test_warmstart_line_says_when_it_will_be_trained(tmp_path, monkeypatch):
    monkeypatch.setenv("TOY_RL_CACHE", str(tmp_path))
    line = warmstart_line("add")
    assert line.startswith("warm start not cached: the first live run trains it") and "2000 supervised steps" in line
    assert "a few seconds" in warmstart_line("add", WarmstartConfig(model=ModelConfig(n_layer=1, n_head=2, d_model=32,
                                                                                       block_size=32), max_steps=30,
                                                                     batch_size=16, warmup_steps=5, eval_every=10,
                                                                     eval_problems=16, heldout_problems=16))
    load_warmstart(EvenLength(), TINY, progress=False)
    assert warmstart_line(EvenLength(), TINY).startswith("warm start cached")


def test_live_view_and_widget_redraw_on_run(logged, monkeypatch):
    base = find_logged([logged], EvenLength(), staleness=2, updates=3)
    base.warmstart = TINY
    live = LiveRuns(base)
    fig, numbers = live_view(live.run("bapo", 0.6, 1.2, 0.4), base)
    assert isinstance(fig, Figure) and numbers["same_as"] == "bapo" and numbers["max_gap"] == 0.0
    assert list(numbers["rows"]) == ["symmetric (2 seeds)", "clip-higher (2 seeds)", "bapo (2 seeds)", "your run"]
    text = live_summary(numbers)
    assert "the same run as its logged seed 0" in text and "your run: bapo (ρ0 0.4, from [0.6, 1.2])" in text
    rows = live_rows(live.run("fixed", 0.7, 1.5), base)
    assert rows["your run"]["c_low"] == pytest.approx(0.7) and rows["your run"]["c_high"] == pytest.approx(1.5)

    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    box = live_widget(live)                                     # draws the starting rule (cached) at once
    assert LIVE_CLASS in box._dom_classes and len(shown) == 1 and isinstance(shown[0], Figure)
    (rule, rho0), (c_low, c_high), (button, status) = (b.children for b in box.children[0].children)
    assert rho0.continuous_update is False and c_high.continuous_update is False
    assert status.value.endswith("from the cache")
    c_high.value = 1.3                                          # moving a slider runs nothing...
    assert len(shown) == 1
    button.click()                                              # ...Run does
    assert len(shown) == 2 and status.value.startswith("bapo (ρ0 0.4, from [0.6, 1.3]): ")
    assert not status.value.endswith("from the cache") and button.description == "Run" and not button.disabled
    rule.value = "fixed"
    assert rho0.disabled
