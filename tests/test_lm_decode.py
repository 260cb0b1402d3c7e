"""The lean decode step (toy_rl/lm/decode.py) against the HF forward on a tiny random Llama with LoRA (no download):
same logits for the same cache state (float32 to 1e-5, bfloat16 to 0.02), the same tokens and log-probs from
``HFPolicy.sample`` greedy and at a fixed seed, per-row stops, prompts of different lengths, LoRA respected,
and the automatic fallback."""
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")
pytest.importorskip("peft", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")

import torch  # noqa: E402
from test_lm_policy import EOS, VOCAB, FakeTokenizer  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM  # noqa: E402

from toy_rl.arithmetic.model.tokenizer import left_pad  # noqa: E402
from toy_rl.lm import decode, logprob  # noqa: E402
from toy_rl.lm.dry_run import enable_gradient_checkpointing  # noqa: E402
from toy_rl.lm.lora import add_lora  # noqa: E402
from toy_rl.lm.forward import new_cache, unique_rows  # noqa: E402
from toy_rl.lm.policy import HFPolicy, positions  # noqa: E402

PROMPTS = [[11, 12, 13, 14, 15, 16, 17], [20, 21], [30, 31, 32, 33], [20, 21]] * 3    # lengths differ; repeats
TOL = {"float32": 1e-5, "bfloat16": 0.02}     # measured: 5e-7 and 0.007, on logits up to 0.32


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (tests/conftest.py)."""


def make_policy(dtype="float32", **kw):
    """A tiny Llama (4 query heads on 2 KV heads) with non-zero LoRA adapters on q, k, v, o and the MLP."""
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      bos_token_id=1, eos_token_id=EOS, pad_token_id=EOS)
    model = add_lora(LlamaForCausalLM(cfg).eval(), rank=4, alpha=8, mlp=True)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    return HFPolicy(model, FakeTokenizer(), **kw).set_dtype(dtype)


def hf_and_lean_logits(policy, steps=3, prompts=PROMPTS, keep=None):
    """Prefill the distinct prompts on the HF forward, build the lean cache from it, then feed the same tokens to
    both: per step (HF logits, lean logits), (rows, vocab). ``keep``: after the first step, only those rows go on
    (as when the others have stopped)."""
    unique, where = unique_rows(prompts)
    ids, mask = left_pad(unique, None, policy.pad_id)
    w, where = decode.weights(policy.model), torch.tensor(where)
    assert torch.equal(where, torch.sort(where).values)         # rows sorted by prompt, as sample_batch sorts them
    cache = new_cache(policy.model)
    hf = policy._forward(ids, mask, cache, logits_to_keep=1)[:, -1][where]
    kv = decode.KV(cache, mask, where, steps)
    cache.batch_select_indices(where)
    mask = mask[where]
    cos, sin = w.rope(64)
    out = []
    for t in range(steps):
        tok = hf.float().argmax(-1)
        if t == 1 and keep is not None:
            keep = torch.tensor(keep)
            kv.keep(keep, t)
            cache.batch_select_indices(keep)
            tok, mask = tok[keep], mask[keep]
        mask = torch.cat([mask, torch.ones((len(tok), 1), dtype=mask.dtype)], 1)
        pos = positions(mask)[:, -1]
        lean = decode.step(w, kv, tok, cos[pos], sin[pos], t)
        hf = policy._forward(tok[:, None], mask, cache, logits_to_keep=1)[:, -1]
        out.append((hf.float(), lean.float()))
    return out


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("prompts", [sorted(PROMPTS), [p for p in PROMPTS[:3] for _ in range(4)], PROMPTS[:3]])
def test_lean_step_logits_match_the_hf_forward(dtype, prompts):
    """Groups of unequal size (a sparse prompt x slot grid), equal groups (dense), all prompts distinct."""
    policy = make_policy(dtype)
    assert policy.lean_reason() is None
    with torch.inference_mode():
        for hf, lean in hf_and_lean_logits(policy, prompts=prompts):
            assert lean.dtype == torch.float32 and lean.shape == hf.shape == (len(prompts), VOCAB)
            assert (lean - hf).abs().max() < TOL[dtype], (lean - hf).abs().max()
            assert (hf.std() > 0.1)          # a real signal, not two zero tensors


def test_dropping_rows_and_whole_prompts_keeps_the_logits():
    prompts = sorted(PROMPTS)               # 3 prompts: rows 0-2, 3-8, 9-11
    policy = make_policy()
    with torch.inference_mode():
        out = hf_and_lean_logits(policy, steps=4, prompts=prompts, keep=[0, 2, 9, 10, 11])   # prompt 1 goes
    assert out[-1][0].shape[0] == 5
    for hf, lean in out:
        assert (lean - hf).abs().max() < TOL["float32"]


def test_refill_moves_the_last_live_rows_into_the_places_of_stopped_ones_and_the_logits_stay():
    prompts = sorted(PROMPTS)               # 3 prompts: rows 0-2, 3-8, 9-11
    stopped = torch.tensor([False, True, False] + [True] * 6 + [False] * 3)     # prompt 1 goes
    keep = decode.refill(stopped)
    assert keep.tolist() == [0, 9, 2, 10, 11]        # rows 0 and 2 stay; 9 and 10 fill the places of 1 and 3
    policy = make_policy()
    with torch.inference_mode():
        out = hf_and_lean_logits(policy, steps=4, prompts=prompts, keep=keep.tolist())
    assert out[-1][0].shape[0] == 5
    for hf, lean in out:
        assert (lean - hf).abs().max() < TOL["float32"]
    assert decode.refill(torch.zeros(3, dtype=torch.bool)).tolist() == [0, 1, 2]
    assert decode.refill(torch.tensor([True, True, False])).tolist() == [2]


def test_lora_is_merged_and_changes_follow_the_adapters():
    policy = make_policy()
    with torch.inference_mode():
        before = hf_and_lean_logits(policy, steps=1, prompts=sorted(PROMPTS))[0]
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name and "v_proj" in name:
                p.mul_(-2.0)
    adapters = {n: p.clone() for n, p in policy.model.named_parameters() if "lora" in n}
    with torch.inference_mode():
        hf, lean = hf_and_lean_logits(policy, steps=1, prompts=sorted(PROMPTS))[0]
    assert (lean - before[1]).abs().max() > 0.01                 # the lean step sees the new adapters ...
    assert (lean - hf).abs().max() < TOL["float32"]              # ... exactly as the HF forward does
    assert all(torch.equal(p, adapters[n]) for n, p in policy.model.named_parameters() if "lora" in n)


def both(policy, temperature, max_new_tokens=20, seed=3):
    """HFPolicy.sample with the lean step and with the HF forward, the same generator seed."""
    out = {}
    for lean in (True, False):
        policy.lean_decode = lean
        out[lean] = policy.sample(PROMPTS, max_new_tokens, temperature, torch.Generator().manual_seed(seed))
    policy.lean_decode = True
    return out[True], out[False]


@pytest.mark.parametrize("temperature", [0.0, 1.0, 0.7])
def test_same_tokens_and_logps_as_the_hf_sampler_in_float32(temperature):
    policy = make_policy()
    lean, hf = both(policy, temperature)
    assert [t for t, _, _ in lean] == [t for t, _, _ in hf]
    assert [f for _, _, f in lean] == [f for _, _, f in hf]
    for (_, a, _), (_, b, _) in zip(lean, hf):
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-5
    lengths = {len(t) for t, _, _ in lean}
    if temperature > 0:      # rows stopped at different steps (the batch was compacted) and others ran on
        assert any(f for _, _, f in lean) and not all(f for _, _, f in lean) and len(lengths) > 2
    for toks, _, done in lean:
        assert done == (toks[-1] in policy.stop_ids) and not any(t in policy.stop_ids for t in toks[:-1])


def test_bfloat16_greedy_agrees_and_sampled_logps_are_the_scorers():
    policy = make_policy("bfloat16")
    lean, hf = both(policy, 0.0)
    same = sum(a[0] == b[0] for a, b in zip(lean, hf))
    assert same >= len(PROMPTS) - 2, same           # bf16 rounds differently: a near-tie may flip a token
    lean, hf = both(policy, 1.0)                    # rescored (policy.rescore): the log-probs of score()
    for (ta, la, _), (tb, lb, _) in zip(lean, hf):
        if ta == tb:
            assert la == lb


def test_chunks_and_seed_repeat():
    policy = make_policy(max_batch=5)
    lean, hf = both(policy, 1.0, seed=11)
    assert [t for t, _, _ in lean] == [t for t, _, _ in hf]
    again = policy.sample(PROMPTS, 20, 1.0, torch.Generator().manual_seed(11))
    assert [t for t, _, _ in again] == [t for t, _, _ in lean]
    one, hf_one = both(policy, 1.0, max_new_tokens=1, seed=11)          # the prefill's draw only
    assert [t for t, _, _ in one] == [t for t, _, _ in hf_one]
    assert [t for t, _, _ in one[:5]] == [t[:1] for t, _, _ in lean[:5]]   # the first chunk's first draw


def test_the_lean_step_is_the_default_and_falls_back(monkeypatch):
    policy, calls = make_policy(), []
    step = decode.step
    monkeypatch.setattr(decode, "step", lambda *a, **k: calls.append(1) or step(*a, **k))
    policy.sample(PROMPTS[:2], 4, 1.0)
    assert calls                                     # used by default
    calls.clear()
    policy.lean_decode = False
    assert policy.lean_reason() == "lean_decode is off"
    policy.sample(PROMPTS[:2], 4, 1.0)
    assert not calls
    policy.lean_decode = True
    enable_gradient_checkpointing(policy.model)
    assert "checkpointing" in policy.lean_reason()
    gpt2 = HFPolicy(GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=16, n_layer=1, n_head=2, n_positions=64)),
                    FakeTokenizer())
    assert "model_type 'gpt2'" in gpt2.lean_reason()
    assert len(gpt2.sample(PROMPTS[:2], 3, 1.0)) == 2 and not calls


def test_draw_samples_the_distribution():
    """10,000 draws of one row over 6 tokens: each token's share within 4 standard errors of its probability (a
    draw that favoured the largest, or ignored the noise, would be far outside); a token of probability 0 never."""
    p = torch.tensor([0.5, 0.25, 0.15, 0.07, 0.03, 0.0])
    logp = p.log().expand(10_000, 6)
    tok = decode.next_token(logp, 1.0, torch.ones(10_000, dtype=torch.bool), torch.Generator().manual_seed(0))[0]
    share = torch.bincount(tok, minlength=6).float() / 10_000
    assert share[5] == 0
    assert ((share - p).abs() <= 4 * (p * (1 - p) / 10_000).sqrt() + 1e-9).all(), share


@pytest.mark.parametrize("chunk", [None, 1, 4], ids=["one-chunk", "1-row-chunks", "4-row-chunks"])
def test_draw_gives_each_row_its_token_whatever_order_the_rows_are_kept_in(chunk, monkeypatch):
    """The lean decoder keeps its rows sorted by prompt and drops stopped ones; the HF path keeps them all in batch
    order. Drawn with ``order`` (each row's place in the batch), both give every live row the same token and leave
    the generator in the same state, whatever chunks of rows next_token works in."""
    if chunk:
        monkeypatch.setattr(logprob, "CHUNK_BYTES", chunk * 8 * 50)
    logp = torch.randn(6, 50).log_softmax(-1)
    live = torch.tensor([True, False, True, True, False, True])
    a, b = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    in_batch = decode.next_token(logp, 1.0, live, a)[0]
    rows = torch.tensor([3, 0, 5, 2])                                   # the live rows, in another order
    kept = decode.next_token(logp[rows], 1.0, torch.ones(4, dtype=torch.bool), b, order=rows)[0]
    assert torch.equal(kept, in_batch[rows]) and (in_batch[~live] == 0).all()
    assert torch.equal(a.get_state(), b.get_state())


@pytest.mark.parametrize("chunk", [None, 2], ids=["one-chunk", "2-row-chunks"])
@pytest.mark.parametrize("temperature", [0.0, 1.0, 0.7])
def test_next_token_gives_the_log_softmax_of_its_token(temperature, chunk, monkeypatch):
    """The log-prob next_token returns is log_softmax(logits / T) at its token (T = 0: argmax, at T = 1), for
    logits far from 0 too, without a log-softmax over the vocabulary."""
    if chunk:
        monkeypatch.setattr(logprob, "CHUNK_BYTES", chunk * 8 * 300)
    logits = torch.randn(5, 300, dtype=torch.float64).float() * 8 + 40
    tok, logp = decode.next_token(logits, temperature, torch.ones(5, dtype=torch.bool), torch.Generator().manual_seed(1))
    z = logits / (temperature or 1.0)
    assert torch.allclose(logp, z.log_softmax(-1).gather(1, tok[:, None]).squeeze(1), atol=1e-5)
    if temperature == 0:
        assert torch.equal(tok, logits.argmax(-1))


def test_rows_not_live_get_token_0_even_when_none_is():
    logits = torch.randn(3, 40)
    tok, _ = decode.next_token(logits, 1.0, torch.zeros(3, dtype=torch.bool), torch.Generator().manual_seed(0))
    assert (tok == 0).all()
    assert torch.equal(decode.next_token(logits, 0.0, torch.zeros(3, dtype=torch.bool))[0], logits.argmax(-1))
