"""toy_rl.lm.attention: grouped-query attention in float32 equals SDPA's math backend with repeated keys and values;
bf16 policies on the CPU use it, float32 ones do not (runs record it: tests/test_lm_bf16.py)."""
import json
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")
pytest.importorskip("peft", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from test_lm_bf16 import batch_of, policy  # noqa: E402
from toy_rl.lm.attention import NAME, grouped_attention, use_grouped, uses_grouped  # noqa: E402

B, H, K, L, S, D = 2, 6, 2, 5, 9, 8


class Module(torch.nn.Module):
    is_causal = True
    num_key_value_groups = H // K


def qkv(dtype=torch.float32, seed=0, length=L, keys=S):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, length, D, generator=g).to(dtype).requires_grad_()
    k = torch.randn(B, K, keys, D, generator=g).to(dtype).requires_grad_()
    v = torch.randn(B, K, keys, D, generator=g).to(dtype).requires_grad_()
    return q, k, v


def sdpa(q, k, v, mask, causal=False):
    """The reference: SDPA's math backend on keys and values repeated per query head, as transformers does."""
    rep = lambda x: x.repeat_interleave(H // K, dim=1)
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(q.float(), rep(k).float(), rep(v).float(), attn_mask=mask,
                                             is_causal=causal)
    return out.transpose(1, 2).to(q.dtype)


def padded_mask():
    """Row 0 sees every key but causally over its last L; row 1's first 3 keys are padding."""
    causal = torch.ones(L, S, dtype=torch.bool).tril(S - L)
    mask = causal.expand(B, 1, L, S).clone()
    mask[1, :, :, :3] = False
    return mask


@pytest.mark.parametrize("case", ["mask", "causal without mask", "one query"])
def test_grouped_attention_equals_sdpa_with_repeated_heads_and_so_do_its_gradients(case):
    length = 1 if case == "one query" else L
    keys = L if case == "causal without mask" else S
    q, k, v = qkv(length=length, keys=keys)
    mask = padded_mask()[:, :, -length:] if case != "causal without mask" else None
    ours, none = grouped_attention(Module(), q, k, v, mask)
    assert none is None and ours.shape == (B, length, H, D) and ours.dtype == q.dtype
    grads = torch.autograd.grad(ours.square().sum(), (q, k, v))
    ref = sdpa(q, k, v, mask, causal=case == "causal without mask")
    ref_grads = torch.autograd.grad(ref.square().sum(), (q, k, v))
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_bf16_inputs_compute_in_float32_and_round_once():
    q, k, v = qkv(torch.bfloat16)
    mask = padded_mask()
    ours, _ = grouped_attention(Module(), q, k, v, mask)
    ref = sdpa(q, k, v, mask)
    assert ours.dtype == torch.bfloat16
    # both round a float32 result to bf16 once: at most one bf16 step apart
    assert ((ours.float() - ref.float()).abs() <= ref.float().abs() * 2 ** -7 + 1e-6).all()


def test_a_query_that_may_attend_no_key_gives_finite_values_and_gradients():
    q, k, v = qkv()
    mask = padded_mask()
    mask[0, :, 2] = False                        # row 0's third query: all keys masked (padding)
    out, _ = grouped_attention(Module(), q, k, v, mask)
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    assert torch.isfinite(out).all() and all(torch.isfinite(g).all() for g in grads)
    keep = torch.ones(B, L, dtype=torch.bool)
    keep[0, 2] = False
    torch.testing.assert_close(out[keep], sdpa(q, k, v, mask)[keep], atol=1e-5, rtol=1e-5)


def test_heads_that_do_not_share_evenly_are_refused():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="share"):
        grouped_attention(Module(), q[:, :5], k, v, None)


def test_dropout_goes_to_transformers_sdpa():
    q, k, v = qkv()
    torch.manual_seed(0)
    out, _ = grouped_attention(Module(), q, k, v, padded_mask(), dropout=0.5)
    torch.manual_seed(0)
    ref, _ = grouped_attention(Module(), q, k, v, padded_mask())
    assert not torch.allclose(out, ref)


def test_use_grouped_switches_an_sdpa_model_and_back_and_leaves_other_implementations_alone():
    class Config:
        _attn_implementation = "sdpa"

    class Model:
        config = Config()
    m = Model()
    use_grouped(m)
    assert m.config._attn_implementation == NAME
    use_grouped(m, False)
    assert m.config._attn_implementation == "sdpa"
    m.config._attn_implementation = "eager"
    use_grouped(m)
    assert m.config._attn_implementation == "eager"


def test_a_bf16_policy_attends_grouped_and_scores_as_sdpa_does_up_to_bf16_rounding():
    p = policy("bfloat16")
    assert uses_grouped(p.model)
    b = batch_of(p)
    m = b.response_mask.bool()
    with torch.no_grad():
        ours = p.score(b.input_ids, b.attention_mask, b.start)[0]
        use_grouped(p.model, False)
        ref = p.score(b.input_ids, b.attention_mask, b.start)[0]
    assert not uses_grouped(p.model)
    assert (ours[m] - ref[m]).abs().max() < 0.05          # nats; a token scored wrongly would be ~1 nat off
    assert not uses_grouped(policy("float32").model)
    assert uses_grouped(policy("float32").set_dtype("bfloat16").model)

