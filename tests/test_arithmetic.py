"""Rung 2 through the one runner (toy_rl.experiments with the toy_rl.arithmetic.run backend): runs from a (tiny)
warm start, resumes, summarises, reads logs back; CLI errors."""

import pytest

from toy_rl.arithmetic.model.gpt import ModelConfig
from toy_rl.arithmetic.policy import TinyPolicy
from toy_rl.arithmetic.tasks import get_task
from toy_rl.arithmetic.warmstart import WarmstartConfig, load_warmstart
from toy_rl.cli import main
from toy_rl.experiments import curve, format_table, grid, load, make_spec, run, run_dir, status, summarize, sweep
from toy_rl.rl.loop import train

TINY = WarmstartConfig(model=ModelConfig(n_layer=1, n_head=2, d_model=32, block_size=32), max_steps=20,
                       batch_size=16, warmup_steps=5, eval_every=10, eval_problems=16, heldout_problems=16)
FAST = dict(steps=4, prompts=2, group_size=4, eval_every=2, eval_size=8, checkpoint_every=2, warmstart=TINY,
            progress=False)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOY_RL_CACHE", str(tmp_path / "cache"))


def test_a_run_is_the_loop_from_the_warm_start(tmp_path):
    """The runner adds nothing to a run: the same records as the loop called by hand on the warm start."""
    spec = make_spec("arithmetic", "add", rule="bapo", staleness=1, seed=2, out=tmp_path / "runs", **FAST)
    assert spec.rl.max_new_tokens == get_task("add").max_answer_chars + 1 and spec.rl.lr == 3e-4
    records = run(spec)
    policy = TinyPolicy(load_warmstart(get_task("add"), TINY, progress=False))
    by_hand = train(spec.rl, policy, get_task("add"), tmp_path / "by-hand", progress=False)
    drop = lambda recs: [{k: v for k, v in r.items() if k not in ("seconds", "seed")} for r in recs]
    assert drop(records) == drop(by_hand) and all(r["seed"] == 2 for r in records)
    assert run_dir(spec) == tmp_path / "runs" / "arithmetic-add" / "reuse-1" / "bapo" / "seed2"


def test_run_resumes_and_sweep_summarises(tmp_path):
    out = tmp_path / "runs"
    spec = make_spec("arithmetic", "add", rule="bapo", staleness=1, out=out, **FAST)
    first = run(spec)
    assert status(spec) == "finished"
    again = run(spec)                                                  # finished: read back, not rerun
    assert again == first
    results = sweep(grid("arithmetic", "add", ["symmetric", "bapo"], (1,), range(2), partial=2, out=out, **FAST))
    assert list(results) == [("reuse-1", "symmetric"), ("reuse-1", "bapo"), ("partial-2", "symmetric"),
                             ("partial-2", "bapo")]
    assert results["reuse-1", "bapo"][0] == first                       # same seed: reused, not rerun
    loaded = load(out / "arithmetic-add")
    assert {k: len(v) for k, v in loaded.items()} == {k: 2 for k in results} and loaded == results
    rows = summarize(loaded)
    assert {(r["scenario"], r["rule"]) for r in rows} == set(results)
    bapo = next(r for r in rows if r["rule"] == "bapo" and r["scenario"] == "reuse-1")
    assert bapo["pairs"] == 2 and bapo["p_vs_symmetric"] is not None and 0.6 <= bapo["c_low"] <= 0.9
    assert "reuse-1" in format_table(rows)
    steps, table = curve(loaded["reuse-1", "bapo"], "accuracy")
    assert list(steps) == [0, 2, 4] and table.shape == (2, 3)
    with pytest.raises(ValueError, match="another config"):             # same folder, other settings
        run(spec.replace(lr=1e-3, resume=True, steps=6))


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
    monkeypatch.setattr(command, "sweep", lambda specs: calls.append(specs) or {})
    scenarios = lambda specs: list(dict.fromkeys((s.rl.staleness, s.rl.partial) for s in specs))
    assert main(["arithmetic", "--partial", "8", "--prompts", "4", "--group-size", "6"]) == 0
    assert scenarios(calls[-1]) == [(0, 8)]                      # --partial alone: only partial rollout
    assert {(s.rl.prompts, s.rl.group_size, s.rung, s.task) for s in calls[-1]} == {(4, 6, "arithmetic", "add")}
    assert main(["arithmetic", "--staleness", "0", "2", "--partial", "8"]) == 0
    assert scenarios(calls[-1]) == [(0, None), (2, None), (0, 8)]
    assert main(["arithmetic"]) == 0
    assert scenarios(calls[-1]) == [(0, None)] and len(calls[-1]) == 3 * 3   # the default: on-policy, 3 rules x 3 seeds


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
