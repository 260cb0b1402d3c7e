"""The interfaces as typing.Protocols: ClippingRule (what policy_loss needs of a rule) and
Policy (what the RL loop needs of a model); and FixedBounds as a plain two-field rule."""
import dataclasses

import pytest
import torch

from toy_rl.clipping import BAPO, ClipHigher, ClippingRule, FixedBounds, Symmetric, policy_loss
from toy_rl.rl.policy import Policy

F64 = torch.float64


@pytest.mark.parametrize("rule", [Symmetric(), ClipHigher(), BAPO(), BAPO.authors_code(), FixedBounds(lo=0.7, hi=1.5)],
                         ids=repr)
def test_every_rule_is_a_clipping_rule(rule):
    assert isinstance(rule, ClippingRule)
    assert isinstance(rule.name, str)


def test_not_a_rule():
    assert not isinstance(object(), ClippingRule)
    assert not isinstance(0.2, ClippingRule)


def test_a_rule_of_ones_own_works_in_policy_loss():
    # Anything with a name and bounds(ratio, adv, mask) -> Bounds, e.g. a fixed rule that ignores weights.
    class Half:
        name = "half"

        def bounds(self, ratio, adv, mask):
            return FixedBounds(lo=0.5, hi=1.5).bounds(ratio, adv, mask)

    assert isinstance(Half(), ClippingRule)
    logp = torch.log(torch.tensor([[0.55, 1.45, 2.0]], dtype=F64))
    for agg in ("token-mean", "seq-mean-token-mean"):
        _, s = policy_loss(logp, torch.zeros_like(logp), torch.ones_like(logp), torch.ones_like(logp), Half(), agg=agg)
        assert (s["c_low"], s["c_high"]) == (0.5, 1.5) and s["clip_frac_high"] == pytest.approx(1 / 3)


def test_tiny_policy_is_a_policy():
    from toy_rl.arithmetic.model.gpt import GPT, ModelConfig
    from toy_rl.arithmetic.policy import TinyPolicy
    assert isinstance(TinyPolicy(GPT(ModelConfig(n_layer=1, n_head=2, d_model=16, block_size=16))), Policy)
    assert not isinstance(object(), Policy)


def test_policy_needs_every_documented_method():
    members = ("encode", "decode", "sample", "score", "trainable_parameters", "get_weights", "set_weights",
               "train", "eval", "device", "pad_id")
    stub = lambda skip: type("Stub", (), {m: (lambda self: None) for m in members if m != skip})()
    assert isinstance(stub(None), Policy)
    for m in members:
        assert not isinstance(stub(m), Policy), m


# ---------------------------------------------------------------- FixedBounds: lo and hi, nothing else

def test_fixed_bounds_has_only_lo_and_hi():
    fb = FixedBounds(lo=0.7, hi=1.5)
    assert [f.name for f in dataclasses.fields(fb)] == ["lo", "hi"]
    assert repr(fb) == "FixedBounds(lo=0.7, hi=1.5)"
    assert not hasattr(fb, "eps_low") and not hasattr(fb, "eps_high")
    assert (fb.c_low, fb.c_high, fb.name) == (0.7, 1.5, "fixed-bounds")
    assert FixedBounds(0.7, 1.5) == fb and repr(FixedBounds()) == "FixedBounds(lo=0.8, hi=1.2)"


def test_fixed_bounds_reports_like_the_other_fixed_rules():
    # Same count/balance reading as Symmetric: at the same bounds, the same stats to the bit.
    assert (FixedBounds.count, FixedBounds.balance) == (Symmetric.count, Symmetric.balance) == ("grad", "share")
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(4, 9, generator=g, dtype=F64)
    logp = old + torch.randn(4, 9, generator=g, dtype=F64) * 0.4
    adv = torch.randn(4, 9, generator=g, dtype=F64)
    mask = torch.ones_like(old)
    _, a = policy_loss(logp, old, adv, mask, Symmetric(0.2))
    _, b = policy_loss(logp, old, adv, mask, FixedBounds(lo=0.8, hi=1.2))
    assert a == b


@pytest.mark.parametrize("kw, pattern", [
    (dict(lo=1.3, hi=1.1), r"^lo 1\.3 > hi 1\.1.*wrong order.*0 < lo <= 1 <= hi"),
    (dict(lo=0.9, hi=0.8), r"^lo 0\.9 > hi 0\.8"),
    (dict(lo=0.5, hi=0.9), r"^bounds must satisfy 0 < lo <= 1 <= hi; got lo=0.5, hi=0.9"),
    (dict(lo=1.1, hi=1.3), r"^bounds must satisfy 0 < lo <= 1 <= hi; got lo=1.1, hi=1.3"),
    (dict(lo=0.0, hi=1.2), r"^bounds must satisfy"),
    (dict(lo="0.8", hi=1.2), r"^lo and hi must be numbers"),
    (dict(lo=0.8, hi=float("nan")), r"^bounds must satisfy"),
])
def test_fixed_bounds_errors(kw, pattern):
    with pytest.raises(ValueError, match=pattern):
        FixedBounds(**kw)
