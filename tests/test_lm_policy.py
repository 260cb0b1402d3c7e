"""HFPolicy's mechanics on a tiny random Llama (built from a config, no download, milliseconds):
left padding and positions, sampled log-probs == scored log-probs, stop tokens, weights in and out."""
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")
pytest.importorskip("peft", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")

import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from toy_rl.lm.lora import add_lora  # noqa: E402
from toy_rl.lm.policy import HFPolicy, positions  # noqa: E402
from toy_rl.rl.rollout import Answer, Group, make_batch  # noqa: E402

EOS, NEWLINE, VOCAB = 2, 3, 64
_ID = {chr(ord("a") + k): 10 + k for k in range(26)}


class FakeTokenizer:
    """Characters 'a'..'z' -> ids 10..35, '\\n' -> 3; id 2 is end-of-text and padding; no BOS."""
    eos_token_id = pad_token_id = EOS
    bos_token_id = unk_token_id = None
    chat_template = None

    def __call__(self, text, add_special_tokens=True):
        return type("Enc", (), {"input_ids": [NEWLINE if c == "\n" else _ID[c] for c in text]})()

    def encode(self, text, add_special_tokens=True):
        return self(text).input_ids

    def __len__(self):
        return VOCAB

    def convert_tokens_to_ids(self, token):
        return None

    def decode(self, ids, skip_special_tokens=True):
        return "".join("\n" if i == NEWLINE else chr(ord("a") + i - 10) for i in ids if i != EOS)


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (tests/conftest.py)."""


@pytest.fixture(scope="module")
def policy(one_thread):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      bos_token_id=1, eos_token_id=EOS, pad_token_id=EOS)
    model = add_lora(LlamaForCausalLM(cfg).eval(), rank=4, alpha=8)
    with torch.no_grad():                 # non-zero adapters, so they matter in every check
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    return HFPolicy(model, FakeTokenizer())


def _batch(policy, prompts, outs):
    groups = [Group(None, [Answer(p, t, lp, [0] * len(t), True)] * 2) for p, (t, lp, _) in zip(prompts, outs)]
    return make_batch(groups, lambda prob, text: 0.0, policy.decode, policy.pad_id)


PROMPTS = [[11, 12, 13, 14, 15, 16, 17], [20, 21], [30, 31, 32, 33], [20, 21]]   # lengths differ; one repeats


def test_positions_from_mask():
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 0]])
    assert positions(mask).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 3]]


def test_defaults_and_encode_decode(policy):
    assert policy.stop_ids == [EOS, NEWLINE] and policy.pad_id == EOS
    assert policy.encode("ab\nc") == [10, 11, NEWLINE, 12]
    assert policy.decode([_ID["x"], _ID["y"], NEWLINE, _ID["z"]]) == "xy"
    assert policy.decode([_ID["x"], EOS, _ID["z"]]) == "x"
    assert policy.cut([5, 6, EOS, 7]) == [5, 6, EOS]
    with pytest.raises(ValueError, match="empty prompt"):
        policy.encode("")
    with pytest.raises(ValueError, match="prompt_format"):
        HFPolicy(policy.model, FakeTokenizer(), prompt_format="markdown")


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("share", [True, False])
def test_sampled_logps_equal_scored_logps(policy, temperature, share):
    g = torch.Generator().manual_seed(1)
    outs = policy.sample(PROMPTS, 6, temperature, g)
    b = _batch(policy, PROMPTS, outs)
    policy.share_prompts = share
    try:
        logp, entropy = policy.score(b.input_ids, b.attention_mask, b.start, temperature)
    finally:
        policy.share_prompts = True
    m = b.response_mask.bool()
    assert logp.requires_grad and torch.isfinite(logp).all() and torch.isfinite(entropy).all()
    assert (logp - b.old_logp)[m].abs().max() < 1e-4
    assert (entropy[m] > 0).all() and (entropy[m] <= torch.log(torch.tensor(float(VOCAB))) + 1e-4).all()


def test_shared_prompt_scoring_gives_the_same_gradients(policy):
    outs = policy.sample(PROMPTS, 5, 1.0, torch.Generator().manual_seed(2))
    b = _batch(policy, PROMPTS, outs)
    grads = []
    for share in (True, False):
        policy.share_prompts = share
        policy.model.zero_grad()
        logp, _ = policy.score(b.input_ids, b.attention_mask, b.start, 1.0)
        (logp * b.response_mask).sum().backward()
        grads.append([p.grad.clone() for p in policy.trainable_parameters()])
    policy.share_prompts = True
    policy.model.zero_grad()
    for a, c in zip(*grads):
        assert torch.allclose(a, c, atol=1e-5, rtol=1e-4)


def test_padding_does_not_change_a_rows_logps(policy):
    """The TRL pitfall: a left-padded row must be scored at its own positions."""
    row = torch.tensor([[20, 21, 22, 23, 24]])
    alone, _ = policy.score(row, torch.ones_like(row), 2, 1.0)
    padded = torch.tensor([[EOS, EOS, EOS, 20, 21, 22, 23, 24], [11, 12, 13, 14, 15, 16, 17, 18]])
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1], [1] * 8])
    both, _ = policy.score(padded, mask, 5, 1.0)
    assert torch.allclose(alone[0], both[0], atol=1e-5)


def test_greedy_is_argmax_with_temperature_one_logps(policy):
    outs = policy.sample(PROMPTS, 4, 0.0, None)
    assert outs == policy.sample(PROMPTS, 4, 0.0, None)
    b = _batch(policy, PROMPTS, outs)
    logp, _ = policy.score(b.input_ids, b.attention_mask, b.start, 1.0)
    m = b.response_mask.bool()
    assert (logp - b.old_logp)[m].abs().max() < 1e-4
    ids = b.input_ids.clone()
    with torch.no_grad():                # each greedy token is the argmax given the tokens before it
        for i, (toks, _, _) in enumerate(outs[:1]):
            for t, tok in enumerate(toks):
                row = ids[i:i + 1, :b.start + t]
                logits = policy.model(input_ids=row, attention_mask=b.attention_mask[i:i + 1, :b.start + t],
                                      position_ids=positions(b.attention_mask[i:i + 1, :b.start + t])).logits
                assert int(logits[0, -1].argmax()) == tok


def test_generator_makes_sampling_repeatable_and_batches_split(policy):
    a = policy.sample(PROMPTS, 6, 1.0, torch.Generator().manual_seed(5))
    b = policy.sample(PROMPTS, 6, 1.0, torch.Generator().manual_seed(5))
    assert a == b
    policy.max_batch = 1
    try:
        assert policy.sample(PROMPTS, 6, 0.0, None) == [policy.sample([p], 6, 0.0, None)[0] for p in PROMPTS]
    finally:
        policy.max_batch = 256


def test_stop_tokens_end_answers(policy):
    every = HFPolicy(policy.model, FakeTokenizer(), stop_ids=range(VOCAB))
    for toks, lps, done in every.sample(PROMPTS, 5, 1.0, torch.Generator().manual_seed(0)):
        assert len(toks) == len(lps) == 1 and done
    never = HFPolicy(policy.model, FakeTokenizer(), stop_ids=[VOCAB + 5])
    for toks, lps, done in never.sample(PROMPTS, 5, 1.0, torch.Generator().manual_seed(0)):
        assert len(toks) == 5 and not done
    for toks, _, done in policy.sample(PROMPTS * 4, 8, 1.0, torch.Generator().manual_seed(0)):
        stops = [i for i, t in enumerate(toks) if t in policy.stop_ids]
        assert stops == ([len(toks) - 1] if done else [])


def test_sample_and_score_argument_errors(policy):
    assert policy.sample([], 4, 1.0, None) == []
    with pytest.raises(ValueError, match="max_new_tokens"):
        policy.sample(PROMPTS, 0, 1.0, None)
    with pytest.raises(ValueError, match="temperature"):
        policy.sample(PROMPTS, 3, -1.0, None)
    with pytest.raises(ValueError, match="at least one token"):
        policy.sample([[]], 3, 1.0, None)
    with pytest.raises(ValueError, match="context"):
        policy.sample(PROMPTS, 60, 1.0, None)
    ids = torch.ones(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="start"):
        policy.score(ids, ids, 0, 1.0)
    with pytest.raises(ValueError, match="start"):
        policy.score(ids, ids, 5, 1.0)


def test_weights_round_trip_only_the_adapters(policy):
    w = policy.get_weights()
    assert w and all("lora_" in k and v.device.type == "cpu" for k, v in w.items())
    assert sum(v.numel() for v in w.values()) == sum(p.numel() for p in policy.trainable_parameters())
    before = policy.sample(PROMPTS, 4, 0.0, None)
    with torch.no_grad():
        for p in policy.trainable_parameters():
            p.add_(1.0)
    assert any(not torch.equal(w[k], v) for k, v in policy.get_weights().items())
    policy.set_weights(w)
    assert policy.sample(PROMPTS, 4, 0.0, None) == before
    w2 = policy.get_weights()
    next(iter(w2.values())).add_(1.0)                     # a copy: the policy is untouched
    assert policy.sample(PROMPTS, 4, 0.0, None) == before
    with pytest.raises(ValueError, match="missing"):
        policy.set_weights({k: v for k, v in list(w.items())[1:]})
    k = next(iter(w))
    with pytest.raises(ValueError, match="shape"):
        policy.set_weights(w | {k: torch.zeros(1)})


def test_train_eval_and_sample_restores_mode(policy):
    policy.train()
    assert policy.model.training
    policy.sample(PROMPTS[:1], 2, 1.0, None)
    assert policy.model.training                 # sample ran in eval mode and put training back
    policy.eval()
    assert not policy.model.training


def test_score_with_gradient_checkpointing_matches_the_plain_forward():
    """Checkpointed layers drop the KV cache in training mode: shared-prompt scoring must not use it."""
    from toy_rl.lm.dry_run import enable_gradient_checkpointing
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, bos_token_id=1, eos_token_id=EOS,
                      pad_token_id=EOS)
    model = LlamaForCausalLM(cfg)
    ids = torch.tensor([[10, 11, 12, 13, 14], [10, 11, 12, 15, 16], [10, 11, 12, 17, 18]])
    mask = torch.ones_like(ids)
    ref = HFPolicy(model, FakeTokenizer(), share_prompts=False).score(ids, mask, 3)[0].detach()
    enable_gradient_checkpointing(model)
    policy = HFPolicy(model, FakeTokenizer(), share_prompts=True)
    policy.train()
    got = policy.score(ids, mask, 3)[0]
    assert torch.allclose(got.detach(), ref, atol=1e-5)
