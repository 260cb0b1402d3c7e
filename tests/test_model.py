"""Rung 2 model: positions under left padding, sampling log-probs == scoring log-probs, KV cache, checkpoints."""
import pytest
import torch

from toy_rl.arithmetic.model import (EOS_ID, GPT, PAD_ID, ModelConfig, decode, encode_prompts, load_checkpoint, load_into,
                          position_ids_from_mask, repad_left, resolve_device, sample, save_checkpoint,
                          token_logprobs)

@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (tests/conftest.py)."""


PROMPTS = ["1+2=", "make 24 from 3 5 8:", "123-45=", "7:"]


def tiny(seed=0, **kw):
    torch.manual_seed(seed)
    return GPT(ModelConfig(**{"n_layer": 2, "n_head": 2, "d_model": 32, "block_size": 48, **kw})).eval()


def eos_happy(model, strength):
    """Make every next-token distribution the same, with EOS boosted: rows then finish at random steps."""
    with torch.no_grad():
        model.ln_f.weight.zero_()
        model.ln_f.bias.copy_(model.wte.weight[EOS_ID] * strength / model.wte.weight[EOS_ID].norm() ** 2)
    return model


def test_position_ids_count_real_tokens_only():
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]])
    assert position_ids_from_mask(mask).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4], [0, 0, 0, 0, 0]]


def test_left_padding_does_not_change_logits():
    model = tiny()
    ids, mask = encode_prompts(PROMPTS)
    padded = model(ids, mask)
    for i, p in enumerate(PROMPTS):
        n = int(mask[i].sum())
        alone, alone_mask = encode_prompts([p])
        assert torch.allclose(padded[i, -n:], model(alone, alone_mask)[0], atol=1e-5)
    assert torch.isfinite(padded).all()                            # padding queries do not produce NaN


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sample_logprobs_match_token_logprobs_with_left_padding(temperature):
    model = tiny()
    ids, mask = encode_prompts(PROMPTS)
    g = torch.Generator().manual_seed(0)
    s = sample(model, ids, mask, max_new_tokens=12, temperature=temperature, generator=g)
    full, full_mask = torch.cat([ids, s.tokens], 1), torch.cat([mask, s.mask], 1)
    scored = token_logprobs(model, full, full_mask, start=ids.shape[1], temperature=temperature)
    assert scored.shape == s.logp.shape
    assert torch.allclose(scored * s.mask, s.logp, atol=1e-5)
    # the same row scored without any padding agrees too
    for i, p in enumerate(PROMPTS):
        alone, alone_mask = encode_prompts([p])
        row = torch.cat([alone, s.tokens[i:i + 1]], 1)
        row_mask = torch.cat([alone_mask, s.mask[i:i + 1]], 1)
        lp = token_logprobs(model, row, row_mask, start=alone.shape[1], temperature=temperature)
        assert torch.allclose(lp * s.mask[i], s.logp[i], atol=1e-5)


def test_kv_cache_greedy_equals_plain_greedy():
    model = tiny(seed=1)
    ids, mask = encode_prompts(PROMPTS)
    s = sample(model, ids, mask, max_new_tokens=10, temperature=0)
    seq, seq_mask = ids, mask                                      # no cache: rerun everything each step
    for _ in range(s.tokens.shape[1]):
        nxt = model(seq, seq_mask)[:, -1].argmax(-1, keepdim=True)
        seq, seq_mask = torch.cat([seq, nxt], 1), torch.cat([seq_mask, torch.ones_like(nxt)], 1)
    plain = seq[:, ids.shape[1]:]
    assert torch.equal(torch.where(s.mask.bool(), s.tokens, -1), torch.where(s.mask.bool(), plain, -1))


def test_mask_ends_at_eos_and_sampling_stops_early():
    model = eos_happy(tiny(), strength=3.0)
    ids, mask = encode_prompts(PROMPTS * 8)
    s = sample(model, ids, mask, max_new_tokens=28, generator=torch.Generator().manual_seed(0))
    assert s.tokens.shape[1] < 28 and s.finished.all()             # every row hit EOS, loop stopped
    for row, m in zip(s.tokens.tolist(), s.mask.tolist()):
        end = row.index(EOS_ID)
        assert m == [1] * (end + 1) + [0] * (len(row) - end - 1)   # 1 up to and including EOS
        assert set(row[end + 1:]) <= {PAD_ID}
    assert (s.logp[s.mask == 0] == 0).all() and (s.logp[s.mask == 1] < 0).all()
    assert len(set(s.lengths.tolist())) > 1                        # rows finished at different steps
    always = sample(eos_happy(tiny(), 50.0), ids, mask, max_new_tokens=5, temperature=0)
    assert always.tokens.shape[1] == 1 and (always.tokens[:, 0] == EOS_ID).all()


def test_unfinished_rows_and_resuming_a_partial_answer():
    model = tiny(seed=2)
    ids, mask = encode_prompts(PROMPTS)
    g = torch.Generator().manual_seed(3)
    first = sample(eos_happy(tiny(seed=2), -20.0), ids, mask, max_new_tokens=4, generator=g)
    assert first.tokens.shape == (4, 4) and not first.finished.any() and first.mask.all()
    # resume: prompt + partial answer is the new prompt (still left-padded: every row has 4 new tokens)
    ids2, mask2 = torch.cat([ids, first.tokens], 1), torch.cat([mask, first.mask], 1)
    second = sample(model, ids2, mask2, max_new_tokens=6, generator=g)
    full = torch.cat([ids2, second.tokens], 1)
    full_mask = torch.cat([mask2, second.mask], 1)
    scored = token_logprobs(model, full, full_mask, start=ids2.shape[1])
    assert torch.allclose(scored * second.mask, second.logp, atol=1e-5)


def test_resuming_rows_that_stopped_at_different_lengths():
    ids, mask = encode_prompts(PROMPTS * 4)
    g = torch.Generator().manual_seed(1)
    first = sample(eos_happy(tiny(seed=2), 2.0), ids, mask, max_new_tokens=3, generator=g)
    keep = ~first.finished                                         # resume the unfinished rows only
    assert 0 < keep.sum() < len(keep)
    ids2, mask2 = repad_left(torch.cat([ids, first.tokens], 1)[keep], torch.cat([mask, first.mask], 1)[keep])
    assert bool(mask2[:, -1].all())
    texts = [decode(r) for r in torch.cat([ids, first.tokens], 1)[keep]]
    assert [decode(r) for r in ids2] == texts                      # same tokens, only the padding moved
    model = tiny(seed=3)                                           # a "newer policy" continues the answers
    second = sample(model, ids2, mask2, max_new_tokens=5, generator=g)
    full, full_mask = torch.cat([ids2, second.tokens], 1), torch.cat([mask2, second.mask], 1)
    assert torch.allclose(token_logprobs(model, full, full_mask, ids2.shape[1]) * second.mask, second.logp,
                          atol=1e-5)


def test_clear_errors_for_bad_prompts():
    model = tiny()
    ids, mask = encode_prompts(PROMPTS)
    with pytest.raises(ValueError, match="block_size=48"):
        sample(model, ids, mask, max_new_tokens=40)                # 20-token prompt + 40 > 48
    right = torch.flip(mask, [1])
    with pytest.raises(ValueError, match="left-padded"):
        sample(model, torch.flip(ids, [1]), right, max_new_tokens=4)
    with pytest.raises(ValueError, match="block_size"):
        model(torch.ones(1, 60, dtype=torch.long))
    with pytest.raises(ValueError, match="start"):
        token_logprobs(model, ids, mask, start=0)


def test_sampling_is_repeatable_and_restores_training_mode():
    model = tiny().train()
    ids, mask = encode_prompts(PROMPTS)
    a = sample(model, ids, mask, 8, generator=torch.Generator().manual_seed(5))
    b = sample(model, ids, mask, 8, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a.tokens, b.tokens) and model.training


def test_entropy_from_scoring():
    model = tiny()
    ids, mask = encode_prompts(PROMPTS)
    logp, ent = token_logprobs(model, ids, mask, start=1, with_entropy=True)
    assert logp.shape == ent.shape == (4, ids.shape[1] - 1)
    assert (ent >= 0).all() and (ent <= torch.log(torch.tensor(float(model.config.vocab_size))) + 1e-5).all()


def test_checkpoint_round_trip_and_size_mismatch(tmp_path):
    model = tiny(seed=4)
    path = save_checkpoint(model, tmp_path / "m.pt", meta={"note": "hi"})
    loaded = load_checkpoint(path, device="cpu")
    ids, mask = encode_prompts(PROMPTS)
    assert torch.equal(model(ids, mask), loaded(ids, mask)) and loaded.meta == {"note": "hi"}
    other = GPT(ModelConfig(n_layer=1, n_head=2, d_model=16, block_size=48))
    with pytest.raises(ValueError, match=r"checkpoint is for .*n_layer=2, .*d_model=32.*this model has .*n_layer=1"):
        load_into(other, path)
    with pytest.raises(ValueError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


def test_device_helper_and_default_size():
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="unknown device"):
        resolve_device("abacus")
    assert GPT().num_params() < 3_000_000
