"""The shared RL loop on a small random GPT: staleness sources, metrics, checkpoint and resume."""
import json

import pytest
import torch

from toy_rl.arithmetic.model.gpt import GPT, ModelConfig
from toy_rl.rl.loop import RLConfig, train
from toy_rl.rl.sources import BatchSource
from toy_rl.arithmetic.policy import TinyPolicy
from toy_rl.arithmetic.tasks import get_task

TASK = get_task("add")
SMALL = ModelConfig(n_layer=1, n_head=2, d_model=32, block_size=32)


def _policy(seed=0):
    torch.manual_seed(seed)
    return TinyPolicy(GPT(SMALL))


def _cfg(**kw):
    base = dict(steps=6, prompts=3, group_size=4, max_new_tokens=TASK.max_answer_chars + 1, eval_every=3,
                eval_size=8, checkpoint_every=2, lr=1e-3)
    return RLConfig(**{**base, **kw})


def _strip(records):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


@pytest.mark.parametrize("kw", [dict(), dict(staleness=2), dict(staleness=2, mode="epochs"), dict(staleness=2, mode="lag"),
                                dict(partial=2)], ids=["on-policy", "reuse", "epochs", "lag", "partial"])
def test_interrupted_run_resumes_to_the_same_metrics(tmp_path, kw, monkeypatch):
    full = train(_cfg(**kw), _policy(), TASK, tmp_path / "full", progress=False)

    calls = {"n": 0}
    real_next = BatchSource.next

    def crash_on_fifth(self, version):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return real_next(self, version)

    monkeypatch.setattr(BatchSource, "next", crash_on_fifth)
    with pytest.raises(KeyboardInterrupt):
        train(_cfg(**kw), _policy(), TASK, tmp_path / "cut", progress=False)
    logged = [json.loads(l) for l in (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged] == [0, 1, 2, 3]           # nothing lost before the crash
    monkeypatch.setattr(BatchSource, "next", real_next)
    resumed = train(_cfg(**kw), _policy(seed=1), TASK, tmp_path / "cut", progress=False)
    assert _strip(resumed) == _strip(full)


def test_on_update_sees_each_update_before_its_step(tmp_path):
    seen = []
    keep = lambda record, batch, logp: seen.append((record["step"], record["ratio_max"], batch, logp))
    records = train(_cfg(staleness=1, eval_every=0), _policy(), TASK, tmp_path, progress=False, on_update=keep)
    assert [s for s, *_ in seen] == [r["step"] for r in records if "c_low" in r] == list(range(6))
    for step, ratio_max, batch, logp in seen:
        assert logp.shape == batch.old_logp.shape and not logp.requires_grad
        m = batch.response_mask.bool()
        assert (logp - batch.old_logp)[m].exp().max().item() == pytest.approx(ratio_max, rel=1e-5)
        if step % 2 == 0:                                   # the first use of each batch is on-policy
            assert torch.allclose(logp[m], batch.old_logp[m], atol=1e-4)


def test_staleness_shows_in_the_metrics(tmp_path):
    reuse = train(_cfg(staleness=2, eval_every=0), _policy(), TASK, tmp_path / "r", progress=False)
    assert [r["staleness_mean"] for r in reuse[:6]] == [0, 1, 2, 0, 1, 2]
    lag = train(_cfg(staleness=2, mode="lag", eval_every=0), _policy(), TASK, tmp_path / "l", progress=False)
    assert [r["staleness_mean"] for r in lag[:6]] == [0, 1, 2, 2, 2, 2]
    epochs = train(_cfg(staleness=2, mode="epochs", eval_every=0), _policy(), TASK, tmp_path / "e", progress=False)
    assert [r["staleness_mean"] for r in epochs[:6]] == [0, 1, 2, 0, 1, 2]
    same_batch = [r["reward_mean"] for r in epochs[:6]]          # one batch serves 3 updates (PPO epochs)
    assert same_batch[0] == same_batch[1] == same_batch[2] and same_batch[3] == same_batch[4] == same_batch[5]
    on = train(_cfg(eval_every=0), _policy(), TASK, tmp_path / "o", progress=False)
    assert all(r["clip_frac"] == 0 and r["ratio_max"] == pytest.approx(1, abs=1e-4) for r in on[:6])


def test_partial_rollout_mixes_policy_versions(tmp_path):
    recs = train(_cfg(partial=1, steps=8, eval_every=0), _policy(), TASK, tmp_path, progress=False)
    trained = [r for r in recs[:-1] if "groups" in r]
    assert trained and all(r["mixed_versions"] > 0 for r in trained)
    assert any("groups" not in r for r in recs[:-1])              # steps where no group finished


def test_resume_refuses_another_config(tmp_path):
    train(_cfg(steps=2), _policy(), TASK, tmp_path, progress=False)
    with pytest.raises(ValueError, match="another config"):
        train(_cfg(steps=2, rule="symmetric"), _policy(), TASK, tmp_path, progress=False)


def test_bad_config():
    with pytest.raises(ValueError, match="rule"):
        RLConfig(rule="ppo")
    with pytest.raises(ValueError, match="staleness"):
        BatchSource(_policy(), TASK, 2, 4, 5, staleness=-1)
    with pytest.raises(ValueError, match="mode"):
        BatchSource(_policy(), TASK, 2, 4, 5, mode="async")
    with pytest.raises(ValueError, match="partial"):
        RLConfig(partial=0)


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_micro_batches_give_the_full_batch_update(agg):
    """Gradient accumulation over micro-batches, with BAPO's bounds searched once for the whole batch."""
    from toy_rl.clipping import BAPO
    from toy_rl.rl.loop import update

    policy = _policy()
    batch = BatchSource(policy, TASK, 3, 4, TASK.max_answer_chars + 1, seed=0).next(0)
    g = torch.Generator().manual_seed(0)
    batch = batch._replace(advantages=torch.randn(batch.advantages.shape, generator=g),
                           old_logp=batch.old_logp + 0.3 * torch.randn(batch.old_logp.shape, generator=g))
    after = []
    for micro in (None, 5):
        p = _policy()
        opt = torch.optim.SGD(p.trainable_parameters(), lr=0.1)
        stats = update(p, opt, batch, BAPO(), _cfg(agg=agg, micro_batch=micro))
        after.append((torch.cat([w.flatten() for w in p.trainable_parameters()]), stats))
    (full, s_full), (micro, s_micro) = after
    assert torch.allclose(full, micro, atol=1e-6)
    assert (s_full["c_low"], s_full["c_high"], s_full["loss"]) == pytest.approx(
        (s_micro["c_low"], s_micro["c_high"], s_micro["loss"]))


@pytest.mark.parametrize("rule", ["symmetric", "clip-higher", "fixed"])
def test_fixed_bounds_skip_the_scoring_pass_and_change_nothing(rule, monkeypatch):
    """A rule whose bounds do not depend on the batch trains its micro-batches without the no-grad pass over the
    whole batch: the same weights, statistics, entropy and log-probs, bit for bit (one micro-batch all padding)."""
    from toy_rl.clipping import ClipHigher, FixedBounds, Symmetric
    from toy_rl.rl import loop

    obj = {"symmetric": Symmetric(), "clip-higher": ClipHigher(), "fixed": FixedBounds(lo=0.7, hi=1.5)}[rule]
    batch = BatchSource(_policy(), TASK, 3, 4, TASK.max_answer_chars + 1, seed=0).next(0)
    g = torch.Generator().manual_seed(0)
    mask = batch.response_mask.clone()
    mask[:5] = 0
    batch = batch._replace(advantages=torch.randn(batch.advantages.shape, generator=g), response_mask=mask,
                           old_logp=batch.old_logp + 0.3 * torch.randn(batch.old_logp.shape, generator=g))
    after, calls = [], []
    for skip in (True, False):
        monkeypatch.setattr(loop, "has_fixed_bounds", lambda r, skip=skip: skip)
        p = _policy()
        score = p.score
        monkeypatch.setattr(p, "score", lambda *a, **k: calls.append(skip) or score(*a, **k))
        opt = torch.optim.SGD(p.trainable_parameters(), lr=0.1)
        stats, logp, _ = loop._update(p, opt, batch, obj, _cfg(micro_batch=5))
        after.append((torch.cat([w.flatten() for w in p.trainable_parameters()]), stats, logp))
    (w_skip, s_skip, lp_skip), (w_pass, s_pass, lp_pass) = after
    assert torch.equal(w_skip, w_pass) and torch.equal(lp_skip, lp_pass)
    assert s_skip == s_pass
    assert calls.count(True) == 3 and calls.count(False) == 3 + 2      # 12 answers in micro-batches of 5


def _jittered_batch(on_policy: bool):
    """A batch of 12 answers (the first 5 all padding), random advantages; off policy: old log-probs jittered."""
    batch = BatchSource(_policy(), TASK, 3, 4, TASK.max_answer_chars + 1, seed=0).next(0)
    g = torch.Generator().manual_seed(0)
    mask = batch.response_mask.clone()
    mask[:5] = 0
    old = batch.old_logp if on_policy else batch.old_logp + 0.3 * torch.randn(batch.old_logp.shape, generator=g)
    return batch._replace(advantages=torch.randn(batch.advantages.shape, generator=g), response_mask=mask,
                          old_logp=old, old_logp_from_update=on_policy)


def _bapo_update_both_ways(monkeypatch, batch, set_way):
    """[(weights, stats, log-probs, score calls)] of one BAPO update in micro-batches of 5, ``set_way(policy, way)``
    for way True, then False."""
    from toy_rl.clipping import BAPO
    from toy_rl.rl import loop
    out = []
    for way in (True, False):
        p, calls = _policy(), []
        set_way(p, way)
        score = p.score
        monkeypatch.setattr(p, "score", lambda *a, **k: calls.append(torch.is_grad_enabled()) or score(*a, **k))
        opt = torch.optim.SGD(p.trainable_parameters(), lr=0.1)
        stats, logp, _ = loop._update(p, opt, batch, BAPO(rho0=0.9), _cfg(micro_batch=5))
        out.append((torch.cat([w.flatten() for w in p.trainable_parameters()]), stats, logp, calls))
    return out


def test_bapo_on_policy_skips_the_search_pass_and_changes_nothing(monkeypatch):
    """On policy every ratio is exactly 1 and BAPO's bounds hold 1, so no token clips whatever the search finds: the
    micro-batches train without the whole-batch pass, and weights, statistics (the bounds searched over the whole
    batch) and log-probs are the same bit for bit as with it."""
    from toy_rl.rl import loop
    needs = loop.needs_search_pass

    def set_way(p, skip):
        monkeypatch.setattr(loop, "needs_search_pass", needs if skip else (lambda rule, on: True))
    batch = _jittered_batch(on_policy=True)
    assert not needs(loop.BAPO(), True) and needs(loop.BAPO(), False)
    (w_skip, s_skip, lp_skip, c_skip), (w_pass, s_pass, lp_pass, c_pass) = _bapo_update_both_ways(
        monkeypatch, batch, set_way)
    assert torch.equal(w_skip, w_pass) and torch.equal(lp_skip, lp_pass) and s_skip == s_pass
    assert s_pass["c_high"] > 1.2                       # the search moved: its bounds are the whole batch's
    assert len(c_skip) == 3 and len(c_pass) == 3 + 2    # 12 answers in micro-batches of 5, the first all padding


def test_held_graphs_score_each_answer_once_and_change_nothing(monkeypatch):
    """``hold_graphs``: BAPO's search pass (off policy) keeps each micro-batch's graph for its backward instead of
    a second forward: one forward per micro-batch, and the same weights, statistics and log-probs bit for bit."""
    batch = _jittered_batch(on_policy=False)
    (w_hold, s_hold, lp_hold, c_hold), (w_two, s_two, lp_two, c_two) = _bapo_update_both_ways(
        monkeypatch, batch, lambda p, hold: setattr(p, "hold_graphs", hold))
    assert torch.equal(w_hold, w_two) and torch.equal(lp_hold, lp_two) and s_hold == s_two
    assert c_hold == [False, True, True] and c_two == [False, False, False, True, True]
