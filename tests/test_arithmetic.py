"""Rung 2 runner: runs from a (tiny) warm start, resumes, summarises, reads logs back; CLI errors."""

import pytest

from toy_rl.arithmetic import compare, curve, format_summary, load_results, run_one, scenario_name, summary
from toy_rl.cli import main
from toy_rl.arithmetic.model.gpt import ModelConfig
from toy_rl.arithmetic.warmstart import WarmstartConfig

TINY = WarmstartConfig(model=ModelConfig(n_layer=1, n_head=2, d_model=32, block_size=32), max_steps=20,
                       batch_size=16, warmup_steps=5, eval_every=10, eval_problems=16, heldout_problems=16)
FAST = dict(steps=4, prompts=2, group_size=4, eval_every=2, eval_size=8, checkpoint_every=2, warmstart=TINY,
            progress=False)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOY_RL_CACHE", str(tmp_path / "cache"))


def test_scenario_names():
    assert scenario_name() == "on-policy"
    assert scenario_name(4) == "reuse-4" and scenario_name(2, "lag") == "lag-2"
    assert scenario_name(0, partial=8) == "partial-8"


def test_run_resumes_and_compare_summarises(tmp_path):
    out = tmp_path / "runs"
    first = run_one("add", "bapo", staleness=1, out=out, **FAST)
    again = run_one("add", "bapo", staleness=1, out=out, **FAST)        # finished: resumes at the end
    assert [r["step"] for r in again] == [r["step"] for r in first]
    results = compare("add", ["symmetric", "bapo"], stalenesses=(1,), partial=2, seeds=range(2), out=out,
                      **FAST)
    assert set(results) == {("reuse-1", "symmetric"), ("reuse-1", "bapo"), ("partial-2", "symmetric"),
                            ("partial-2", "bapo")}
    assert results["reuse-1", "bapo"][0] == first                       # same seed: reused, not rerun
    loaded = load_results(out / "add")
    assert {k: len(v) for k, v in loaded.items()} == {k: 2 for k in results}
    rows = summary(loaded)
    assert {(r["scenario"], r["rule"]) for r in rows} == set(results)
    bapo = next(r for r in rows if r["rule"] == "bapo" and r["scenario"] == "reuse-1")
    assert bapo["p_vs_symmetric"] is not None and 0.6 <= bapo["c_low"] <= 0.9
    assert "reuse-1" in format_summary(rows)
    steps, table = curve(loaded["reuse-1", "bapo"], "accuracy")
    assert list(steps) == [0, 2, 4] and table.shape == (2, 3)


def test_cli_json_and_errors(tmp_path, capsys, monkeypatch):
    assert main(["arithmetic", "--task", "sum"]) == 2
    assert "unknown task" in capsys.readouterr().err
    assert main(["arithmetic", "--staleness", "-1"]) == 2
    assert main(["arithmetic", "--rule", "ppo"]) == 2
    assert "unknown rule" in capsys.readouterr().err
    assert main(["arithmetic", "--partial", "0"]) == 2
    assert main(["arithmetic", "--group-size", "1"]) == 2
    assert "--group-size must be >= 2" in capsys.readouterr().err


def test_cli_scenarios_and_batch_shape(monkeypatch, capsys):
    import toy_rl.commands.arithmetic as command
    calls = []
    monkeypatch.setattr(command, "compare", lambda *a, **k: calls.append((a, k)) or {})
    assert main(["arithmetic", "--partial", "8", "--prompts", "4", "--group-size", "6"]) == 0
    (task, rules, stalenesses, mode, partial, seeds, out), kw = calls[-1]
    assert stalenesses == [] and partial == 8                  # --partial alone: only partial rollout
    assert kw["prompts"] == 4 and kw["group_size"] == 6
    assert main(["arithmetic", "--staleness", "0", "2", "--partial", "8"]) == 0
    assert calls[-1][0][2] == [0, 2] and calls[-1][0][4] == 8
    assert main(["arithmetic"]) == 0
    assert calls[-1][0][2] == [0] and calls[-1][0][4] is None   # the default: on-policy


def test_entropy_check_first_order_on_a_transformer():
    import torch
    from toy_rl.clipping import BAPO, Symmetric
    from toy_rl.arithmetic.model.gpt import GPT
    from toy_rl.rl.entropy_check import entropy_rule_check, error_slope
    from toy_rl.rl.sources import BatchSource
    from toy_rl.arithmetic.policy import TinyPolicy
    from toy_rl.arithmetic.tasks import get_task

    torch.manual_seed(0)
    policy = TinyPolicy(GPT(TINY.model))
    batch = BatchSource(policy, get_task("add"), 4, 4, 4, seed=0).next(0)
    g = torch.Generator().manual_seed(1)         # a random model earns no reward: give it advantages and
    batch = batch._replace(advantages=torch.randn(batch.advantages.shape, generator=g),   # stale log-probs
                           old_logp=batch.old_logp + 0.3 * torch.randn(batch.old_logp.shape, generator=g))
    for rule in (Symmetric(), BAPO()):
        r = entropy_rule_check(policy.model, batch, rule, lr=1e-3)
        assert r["positions"] == int(batch.response_mask.sum())
        assert r["correlation"] > 0.99 and r["sign_agreement"] > 0.95
        # the quadrants split the positions and their entropy change exactly
        assert sum(r["quadrant_count"].values()) == r["positions"]
        assert sum(r["quadrant_dH"].values()) == pytest.approx(r["exact"].sum())
    assert 1.7 < error_slope(policy.model, batch, BAPO()) < 2.3
