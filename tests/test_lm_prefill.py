"""Rung 3's prefill (toy_rl.lm.prefill): the few-shot prefix the prompts share runs once. The shared length; the
same last states and cached keys as prompts run side by side; and, on a tiny random Llama with LoRA, the same
samples, log-probs, entropies and gradients with the prefix shared and not; runs record it and resume as they
started."""
import json
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")
pytest.importorskip("peft", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")

import torch  # noqa: E402

from test_lm_bf16 import batch_of, policy, scored_on_and_off  # noqa: E402
from test_lm_run import spec  # noqa: E402
from toy_rl.arithmetic.model.gpt import distinct_rows  # noqa: E402
from toy_rl.experiments import run, status  # noqa: E402
from toy_rl.lm.forward import cache_layers, new_cache  # noqa: E402
from toy_rl.lm.prefill import MIN_SHARED, prefill, shared_prefix  # noqa: E402

FEW_SHOT = list(range(3, 15))                                          # 12 tokens every prompt starts with
PROMPTS = [FEW_SHOT + [16, 17, 18], FEW_SHOT + [19], FEW_SHOT + [5, 20]]


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (tests/conftest.py)."""


def test_shared_prefix_leaves_every_prompt_a_token_of_its_own():
    assert shared_prefix(PROMPTS) == 12
    assert shared_prefix([[1, 2, 3], [1, 2, 3, 4]]) == 2                # not the whole of the shorter one
    assert shared_prefix([[1, 2], [3, 2]]) == 0 and shared_prefix([[5, 6, 7]]) == 2


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_prefix_once_gives_the_states_and_keys_of_whole_prompts(dtype):
    """Each prompt's last state, and its cached keys at its real tokens, as when every prompt runs whole."""
    p = policy(dtype)
    out = {}
    with torch.no_grad():
        for share in (True, False):
            cache = new_cache(p.model)
            pre = prefill(p, PROMPTS, cache, share=share)
            keys = [k[i][:, pre.keys[i]] for i in range(len(PROMPTS)) for k, _ in cache_layers(cache)]
            out[share] = pre, keys
    (shared, k1), (side, k0) = out[True], out[False]
    assert shared.keys.shape == (3, 12 + 3) and side.keys.shape == (3, 15)          # prefix + longest tail
    assert shared.keys.sum(1).tolist() == side.keys.sum(1).tolist() == shared.lengths.tolist() == [15, 13, 14]
    assert shared.keys[1].tolist() == [True] * 13 + [False] * 2                    # a short tail: padding after
    tol = {"float32": 1e-5, "bfloat16": 0.05}[dtype]
    assert (shared.last.float() - side.last.float()).abs().max() < tol and side.last.float().std() > 0.1
    assert all((a.float() - b.float()).abs().max() < tol for a, b in zip(k1, k0))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_scoring_with_the_prefix_once_gives_the_same_numbers(dtype):
    """Packed scoring with the prefix shared and not: log-probs, entropies, the adapters' gradients."""
    p = policy(dtype)
    b = batch_of(p)
    first, _ = distinct_rows(b.input_ids[:, :b.start], b.attention_mask[:, :b.start])
    assert len(first) > 1
    prompts = [r[m.bool()].tolist() for r, m in zip(b.input_ids[first, :b.start], b.attention_mask[first, :b.start])]
    assert shared_prefix(prompts) >= MIN_SHARED                     # the few-shot examples: the prefix is shared
    m = b.response_mask.bool()
    (lp, ent, g), (lp0, ent0, g0) = scored_on_and_off(p, b, "share_prefix")
    tol = {"float32": 1e-5, "bfloat16": 0.05}[dtype]
    assert torch.allclose(lp[m], lp0[m], atol=tol) and torch.allclose(ent[m], ent0[m], atol=tol)
    assert all((a - c).norm() <= tol * c.norm() for a, c in zip(g, g0))
    assert lp[m].std() > 0.1


def test_sampling_with_the_prefix_once_draws_the_same_answers():
    p = policy()
    prompts = [q for q in PROMPTS for _ in range(3)]
    out = {}
    for share in (True, False):
        p.share_prefix = share
        out[share] = p.sample(prompts, 6, 1.0, torch.Generator().manual_seed(5))
    assert [t for t, _, _ in out[True]] == [t for t, _, _ in out[False]]
    assert max(abs(a - b) for (_, x, _), (_, y, _) in zip(out[True], out[False]) for a, b in zip(x, y)) < 1e-5


def test_a_run_records_the_prefix_and_resumes_as_it_started(tmp_path):
    """A run started before the shared prefix (its config.json names no "prompt_prefix") resumes without it."""
    run(spec(where=tmp_path, rule="symmetric", steps=2))
    path = tmp_path / "config.json"
    config = json.loads(path.read_text())
    assert config["prompt_prefix"] == "once" and config["prompts"] == 2
    del config["prompt_prefix"]
    path.write_text(json.dumps(config))
    longer = spec(where=tmp_path, rule="symmetric", steps=3)
    assert status(longer) == "resumed"
    run(longer)
    assert "prompt_prefix" not in json.loads(path.read_text())


@pytest.mark.parametrize("rule, hold", [("symmetric", False), ("bapo", False), ("bapo", True)])
def test_micro_batches_share_one_prefix_forward_and_the_gradients_stay(monkeypatch, rule, hold):
    """An update in micro-batches of 4 answers (3 prompts, so 3 micro-batches of one prompt each) runs the prefix
    once, forwarding fewer tokens than when each micro-batch runs its prompt whole, and gathers the same gradients
    (float32, to 1e-5 of their size)."""
    from toy_rl.rl.config import RLConfig
    from toy_rl.rl.loop import _accumulate
    p = policy()
    p.hold_graphs = hold
    b = batch_of(p)
    noise = torch.randn(b.old_logp.shape, generator=torch.Generator().manual_seed(0))
    b = b._replace(old_logp=b.old_logp + 0.3 * noise)                  # ratios away from 1: some clip
    cfg = RLConfig(rule=rule, group_size=4, max_new_tokens=6, micro_batch=4)
    tokens = []
    forward = p._forward
    monkeypatch.setattr(p, "_forward", lambda ids, *a, **k: tokens.append(ids.shape[0] * ids.shape[1])
                        or forward(ids, *a, **k))
    out = {}
    for once in (True, False):
        if not once:
            monkeypatch.setattr(type(p), "prefix_once", None)     # each micro-batch's prefill runs its own prompt
        p.model.zero_grad()
        tokens.clear()
        _, _, _, logp, _ = _accumulate(p, b, cfg.rule_obj, cfg)
        out[once] = sum(tokens), logp.detach(), [w.grad.clone() for w in p.trainable_parameters()]
    (n1, lp1, g1), (n0, lp0, g0) = out[True], out[False]
    ids, mask = b.input_ids[:, :b.start], b.attention_mask[:, :b.start]
    shared = shared_prefix([r[m.bool()].tolist() for r, m in zip(ids, mask)])
    passes = 2 if rule == "bapo" and not hold else 1
    assert shared >= MIN_SHARED and n0 - n1 == (3 * passes - 1) * shared
    assert torch.allclose(lp1, lp0, atol=1e-6)
    assert all((a - c).norm() <= 1e-5 * c.norm() for a, c in zip(g1, g0)) and sum(c.norm() for c in g0) > 0
