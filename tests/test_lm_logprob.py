"""toy_rl.lm.logprob: each token's log-prob and entropy, with their gradient, as log_softmax + gather give them."""
import copy

import pytest
import torch

from toy_rl.lm import logprob
from toy_rl.lm.logprob import head_logp, token_logp


@pytest.fixture(params=[None, 1, 3], ids=["one-chunk", "1-row-chunks", "3-row-chunks"])
def chunk_rows(request, monkeypatch):
    """Rows per chunk of the vocabulary-sized work (None: the default, one chunk for these small vocabularies)."""
    def set_for(vocab):
        if request.param is not None:
            monkeypatch.setattr(logprob, "CHUNK_BYTES", request.param * 4 * vocab)
    return set_for


def reference(logits, targets, temperature):
    z = logits.float() / (temperature or 1.0)
    logp_all = z.log_softmax(-1)
    return logp_all.gather(1, targets[:, None]).squeeze(1), -(logp_all.exp() * logp_all).sum(-1)


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
def test_log_probs_entropy_and_gradients_match_log_softmax(temperature, chunk_rows):
    torch.manual_seed(0)
    chunk_rows(500)
    logits = (torch.randn(7, 500) * 6 + 30).requires_grad_()
    targets = torch.randint(0, 500, (7,))
    weights = torch.randn(7)
    logp, ent = token_logp(logits, targets, temperature)
    (logp * weights).sum().backward()
    ours = logits.grad.clone()
    logits.grad = None
    ref_logp, ref_ent = reference(logits, targets, temperature)
    (ref_logp * weights).sum().backward()
    assert torch.allclose(logp, ref_logp, atol=1e-5) and torch.allclose(ent, ref_ent, atol=1e-4)
    assert not ent.requires_grad
    assert torch.allclose(ours, logits.grad, atol=1e-6)


def test_bf16_logits_get_float32_values_and_a_bf16_gradient():
    logits = torch.randn(3, 50, dtype=torch.bfloat16, requires_grad=True)
    logp, ent = token_logp(logits, torch.tensor([1, 2, 3]), entropy=False)
    assert logp.dtype == torch.float32 and ent is None
    logp.sum().backward()
    assert logits.grad.dtype == torch.bfloat16
    assert torch.allclose(logits.grad.float().sum(-1), torch.zeros(3), atol=0.05)     # sum(onehot - p) = 0


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match=r"\(N, vocab\)"):
        token_logp(torch.zeros(2, 3, 4), torch.zeros(2, dtype=torch.long))


@pytest.mark.parametrize("frozen", [True, False])
def test_the_head_and_its_log_probs_in_one_match_the_head_then_log_softmax(frozen, chunk_rows):
    """HeadLogProb's gradient for the hidden states (and the weight, where it trains) is what the head's own
    backward gives through log_softmax + gather, chunk by chunk as in one piece; without a gradient to make (no_grad)
    it gives the same numbers; a head with a bias goes through its own forward."""
    torch.manual_seed(1)
    chunk_rows(300)
    head = torch.nn.Linear(16, 300, bias=False)
    head.weight.requires_grad_(not frozen)
    hidden = torch.randn(9, 16, requires_grad=True)
    targets, weights = torch.randint(0, 300, (9,)), torch.randn(9)
    grads = []
    for fn in (lambda: head_logp(hidden, head, targets, 0.8),
               lambda: reference(head(hidden), targets, 0.8)):
        logp, ent = fn()
        (logp * weights).sum().backward()
        grads.append((logp.detach(), ent.detach(), hidden.grad.clone(),
                      None if frozen else head.weight.grad.clone()))
        hidden.grad = head.weight.grad = None
    (lp, en, gh, gw), (rlp, ren, rgh, rgw) = grads
    assert torch.allclose(lp, rlp, atol=1e-5) and torch.allclose(en, ren, atol=1e-4)
    assert torch.allclose(gh, rgh, atol=1e-6)
    assert frozen or torch.allclose(gw, rgw, atol=1e-6)
    with torch.no_grad():
        nlp, nen = head_logp(hidden, head, targets, 0.8)
    assert torch.allclose(nlp, lp, atol=1e-6) and torch.allclose(nen, en, atol=1e-6)
    biased = torch.nn.Linear(16, 300)
    assert torch.allclose(head_logp(hidden, biased, targets)[0], reference(biased(hidden), targets, 1.0)[0], atol=1e-5)


def test_a_bf16_head_keeps_one_minus_p_of_a_confident_token_in_float32():
    """With p[y] near 1 the hidden state's gradient is (1 - p[y]) W[y] - sum of the other p W: rounding p[y] to
    bf16 first would move 1 - p[y] by up to 17 %; ours stays within bf16's rounding of the products."""
    torch.manual_seed(2)
    head = torch.nn.Linear(16, 300, bias=False).requires_grad_(False)
    targets = torch.randint(0, 300, (6,))
    hidden = (head.weight[targets] * 60).clone()                 # each row points at its target: p[y] ~ 0.99
    ref = hidden.clone().requires_grad_()
    logp = reference(head(ref), targets, 1.0)[0]
    logp.sum().backward()
    assert (logp.exp() > 0.9).all()
    low = hidden.bfloat16().requires_grad_()
    head_logp(low, copy.deepcopy(head).bfloat16(), targets, entropy=False)[0].sum().backward()
    assert torch.allclose(low.grad.float(), ref.grad, rtol=0.03, atol=0.03 * ref.grad.abs().max())


def test_scoring_without_a_gradient_gives_the_update_pass_numbers_to_the_last_bit(chunk_rows):
    """A bf16 batch rescored after sampling (no_grad) and then trained on policy must see ratios of exactly 1: the
    head's products run in the same chunks with and without a gradient to make."""
    torch.manual_seed(3)
    chunk_rows(300)
    head = torch.nn.Linear(16, 300, bias=False).to(torch.bfloat16).requires_grad_(False)
    hidden = torch.randn(11, 16, dtype=torch.bfloat16, requires_grad=True)
    targets = torch.randint(0, 300, (11,))
    with torch.no_grad():
        scored = head_logp(hidden, head, targets)
    trained = head_logp(hidden, head, targets)
    assert torch.equal(scored[0], trained[0]) and torch.equal(scored[1], trained[1].detach())
