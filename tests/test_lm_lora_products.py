"""toy_rl.lm.lora.low_precision_products: LoRA layers of a bf16 model multiply in bf16 and keep float32 adapters,
with the outputs and gradients of peft's float32 products up to bf16 rounding."""
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")
pytest.importorskip("peft", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")

import torch  # noqa: E402

from test_lm_bf16 import batch_of, policy  # noqa: E402
from toy_rl.lm.lora import low_precision_products, uses_low_precision_products  # noqa: E402


def scored(p, b):
    """(log-probs, adapter gradients) of batch ``b`` under ``p``."""
    p.model.zero_grad()
    logp, _ = p.score(b.input_ids, b.attention_mask, b.start)
    (logp * b.response_mask).sum().backward()
    return logp.detach(), [w.grad.clone() for w in p.trainable_parameters()]


def test_a_bf16_policy_multiplies_lora_in_bf16_with_peft_s_numbers_up_to_rounding():
    p = policy("bfloat16")
    assert uses_low_precision_products(p.model)
    b = batch_of(p)
    m = b.response_mask.bool()
    lp, grads = scored(p, b)
    low_precision_products(p.model, False)
    assert not uses_low_precision_products(p.model)
    lp0, grads0 = scored(p, b)
    assert (lp[m] - lp0[m]).abs().max() < 0.05                  # nats; bf16 rounding, not a wrong sum
    assert lp[m].std() > 0.1
    for g, g0 in zip(grads, grads0):
        assert g.dtype == torch.float32                          # the adapters and their gradients stay float32
        assert torch.linalg.vector_norm(g - g0) <= 0.05 * torch.linalg.vector_norm(g0)


def test_float32_keeps_peft_s_products_and_a_switched_model_can_switch_back():
    p = policy("float32")
    assert not uses_low_precision_products(p.model)
    p.set_dtype("bfloat16")
    assert uses_low_precision_products(p.model)
    p.set_dtype("float32")
    assert not uses_low_precision_products(p.model)


def test_a_float32_input_goes_through_peft_s_forward_unchanged():
    p = policy("float32")
    layer = next(m for m in p.model.modules() if hasattr(m, "lora_A") and hasattr(m, "base_layer"))
    x = torch.randn(3, layer.base_layer.in_features)
    before = layer(x)
    low_precision_products(p.model)
    assert torch.equal(layer(x), before)
