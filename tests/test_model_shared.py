"""Shared prompts: a GRPO group's prompt runs once, in sampling (KV cache) and in scoring (packed rows),
with the same numbers."""
import pytest
import torch

from toy_rl.arithmetic.model import GPT, KVCache, ModelConfig, encode_prompts, sample, token_logprobs
from toy_rl.arithmetic.model.scoring import next_token_logits


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (tests/conftest.py)."""


PROMPTS = ["1+2=", "make 24 from 3 5 8:", "123-45=", "7:"]


def tiny(seed=0):
    torch.manual_seed(seed)
    return GPT(ModelConfig(n_layer=2, n_head=2, d_model=32, block_size=48))


def groups(model, G=3, n=6, temperature=1.0, seed=0):
    """Each prompt G times (rows of one group adjacent, as make_batch lays them out), sampled."""
    ids, mask = encode_prompts([p for p in PROMPTS for _ in range(G)])
    s = sample(model, ids, mask, n, temperature=temperature, generator=torch.Generator().manual_seed(seed))
    return ids, mask, s


@pytest.mark.parametrize("index, room", [([2, 0, 2], 0), ([2, 0, 2], 1), ([0, 0, 1, 1, 2, 2, 3, 3], 5)])
def test_kv_cache_select_copies_rows(index, room):
    """Rows copied (repeats, any order; in groups: a broadcast copy), then two tokens appended
    (written into the free slots, or concatenated when there are none)."""
    model = tiny().eval()
    ids, mask = encode_prompts(PROMPTS)
    cache = KVCache(model.config.n_layer)
    model(ids, mask, cache=cache)
    index = torch.tensor(index)
    cache.select(index, room)
    assert cache.length == ids.shape[1] and cache.mask.shape == (len(index), ids.shape[1])
    seq, seq_mask = ids[index], mask[index]
    for step in range(2):
        nxt = torch.arange(len(index))[:, None] + 5 + step
        with_cache = model(nxt, torch.ones_like(nxt), cache=cache)[:, -1]
        seq, seq_mask = torch.cat([seq, nxt], 1), torch.cat([seq_mask, torch.ones_like(nxt)], 1)
        assert torch.allclose(with_cache, model(seq, seq_mask)[:, -1], atol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_shared_prefill_samples_the_same_tokens(temperature):
    """Sharing the prompt's prefill draws exactly what running every row's prompt draws."""
    model = tiny().eval()
    ids, mask, s = groups(model, temperature=temperature)
    # the same rows made distinct: an unused extra column the model never attends to (position 0, masked)
    pad = torch.zeros((ids.shape[0], 1), dtype=torch.long)
    distinct = torch.cat([torch.arange(ids.shape[0])[:, None], ids], 1), torch.cat([pad, mask], 1)
    u = sample(model, *distinct, 6, temperature=temperature, generator=torch.Generator().manual_seed(0))
    assert torch.equal(s.tokens, u.tokens) and torch.equal(s.mask, u.mask)
    assert torch.allclose(s.logp, u.logp, atol=1e-6)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_shared_scoring_equals_plain_scoring_in_values_and_gradients(temperature):
    model = tiny()
    ids, mask, s = groups(model, temperature=temperature)
    full, full_mask, P = torch.cat([ids, s.tokens], 1), torch.cat([mask, s.mask], 1), ids.shape[1]
    weights = torch.randn(s.mask.shape, generator=torch.Generator().manual_seed(1)) * s.mask

    def run(share):
        model.zero_grad(set_to_none=True)
        lp, ent = token_logprobs(model, full, full_mask, P, temperature, with_entropy=True, share_prompts=share)
        (lp * weights).sum().backward()
        return lp.detach(), ent, {n: p.grad.clone() for n, p in model.named_parameters()}

    lp_s, ent_s, g_s = run(True)
    lp_p, ent_p, g_p = run(False)
    assert torch.allclose(lp_s, lp_p, atol=1e-5) and torch.allclose(ent_s, ent_p, atol=1e-5)
    assert torch.allclose(lp_s * s.mask, s.logp, atol=2e-5)          # sampled == scored
    for n in g_p:
        assert torch.allclose(g_s[n], g_p[n], atol=1e-5, rtol=1e-4), n
    assert not ent_s.requires_grad


def test_shared_scoring_edge_cases():
    model = tiny().eval()
    ids, mask, s = groups(model, G=2, n=1)                   # one answer column: only the prompts run
    full, full_mask, P = torch.cat([ids, s.tokens], 1), torch.cat([mask, s.mask], 1), ids.shape[1]
    assert torch.allclose(next_token_logits(model, full, full_mask, P),
                          next_token_logits(model, full, full_mask, P, share_prompts=False), atol=1e-5)
    ids, mask = encode_prompts(PROMPTS)                      # all prompts distinct: the plain forward
    P = ids.shape[1] - 1
    assert torch.equal(next_token_logits(model, ids, mask, P), model(ids, mask)[:, P - 1:-1])
    # rows whose first 3 columns are all padding share that "prompt": still the same numbers
    assert torch.allclose(next_token_logits(model, ids, mask, 3), model(ids, mask)[:, 2:-1], atol=1e-5)
    # a hole in an answer (a padding column before real ones) is run like any other column
    ids, mask, s = groups(model, G=2, n=5, seed=4)
    full, full_mask, P = torch.cat([ids, s.tokens], 1), torch.cat([mask, s.mask], 1), ids.shape[1]
    full_mask[0, P + 1], full_mask[0, P + 2:] = 0, 1
    assert torch.allclose(next_token_logits(model, full, full_mask, P),
                          next_token_logits(model, full, full_mask, P, share_prompts=False), atol=1e-5)
    ids, mask = encode_prompts(PROMPTS)
    # a same prompt with a different padding mask is a different prompt
    twice = torch.cat([ids[:1], ids[:1]]), torch.cat([mask[:1], mask[:1] * 0 + 1])
    assert torch.allclose(next_token_logits(model, *twice, 4),
                          next_token_logits(model, *twice, 4, share_prompts=False), atol=1e-5)


@pytest.mark.parametrize("row_tokens", [64, 30, 1])
def test_packing_groups_of_any_size_and_order(row_tokens):
    """Groups of unequal size, rows of a group not adjacent, several packed rows per group (short rows)."""
    model = tiny()
    order = torch.tensor([0, 5, 1, 0, 9, 2, 5, 5, 1, 0, 3])
    ids, mask = encode_prompts([PROMPTS[i % len(PROMPTS)] + str(i // len(PROMPTS)) for i in order.tolist()])
    s = sample(model, ids, mask, 7, generator=torch.Generator().manual_seed(3))
    full, full_mask, P = torch.cat([ids, s.tokens], 1), torch.cat([mask, s.mask], 1), ids.shape[1]
    plain = next_token_logits(model, full, full_mask, P, share_prompts=False)
    packed = next_token_logits(model, full, full_mask, P, row_tokens=row_tokens)
    assert packed.shape == plain.shape and torch.allclose(packed, plain, atol=1e-5)


def test_tiny_policy_samples_repeated_prompts_in_order():
    """TinyPolicy left-pads each distinct prompt once and tells the sampler which prompt each answer continues."""
    from toy_rl.arithmetic.policy import TinyPolicy
    policy = TinyPolicy(tiny().eval())
    a, b = policy.encode("12+7="), policy.encode("make 24 from 3 5 8:")
    out = policy.sample([a, b, a, a, b], 6, 0.0)                      # greedy: equal prompts, equal answers
    alone = {tuple(p): policy.sample([p], 6, 0.0)[0] for p in (a, b)}
    for p, (toks, lps, done) in zip([a, b, a, a, b], out):
        ref_toks, ref_lps, ref_done = alone[tuple(p)]
        assert toks == ref_toks and done == ref_done and len(lps) == len(toks)
        assert torch.allclose(torch.tensor(lps), torch.tensor(ref_lps), atol=1e-5)
    g = lambda: torch.Generator().manual_seed(7)                      # and sampled: repeatable
    assert policy.sample([a, b, a], 6, 1.0, g()) == policy.sample([a, b, a], 6, 1.0, g())
