"""Each answer token's log-prob, and the entropy of its next-token distribution, from the LM head's logits: the
largest tensors of a rung-3 update ((answer tokens) x 49,152 vocabulary entries, 200 MB in float32 for a
micro-batch of 1,000 tokens).

The ratio in the clipped surrogate (BAPO Eq. 3) needs log pi(y_t | context) = z[y_t] - logsumexp(z)
and its gradient, dlogp/dz = onehot(y_t) - softmax(z). ``log_softmax`` then ``gather`` gets there through a log-prob
tensor for every vocabulary entry, a zero-filled one for the gather's gradient and a third for the log-softmax's;
:class:`TokenLogProb` keeps one: the softmax, from which the forward reads the entropy and the backward makes the
gradient. :class:`HeadLogProb` starts one step earlier, from the hidden states h under the head's weight W
(z = h W^T), and makes the gradient the head's backward needs, dlogp/dh = (W[y] - p W) / T, without the (N, vocab)
gradient of the logits.

    z = logits / T;  p = softmax(z);  logp = z[y] - logsumexp(z);  entropy = logsumexp(z) - sum(p * z)
    backward: dz = g * (onehot(y) - p) / T;   from h: dh = g * (W[y] - p W) / T
"""
from __future__ import annotations

import torch


def _logits_grad(p, targets, g):
    """g * (onehot(targets) - p), float32 (N, V): the logits' gradient from the log-probs' gradient g (N,)."""
    dz = p * -g[:, None]
    dz[torch.arange(len(targets), device=dz.device), targets] += g
    return dz


def _softmax_stats(z, targets, entropy: bool):
    """(p = softmax(z), logp of targets, entropy or None) of float32 logits z (N, V); p is made in a new buffer."""
    top = z.max(-1, keepdim=True).values
    p = (z - top).exp_()
    total = p.sum(-1, keepdim=True)
    lse = (top + total.log()).squeeze(1)
    logp = z.gather(1, targets[:, None]).squeeze(1) - lse
    p.div_(total)
    ent = None
    if entropy:                         # sum(p * z) as one (1 x V) @ (V x 1) product per row: no (N, V) temporary
        ent = lse - torch.bmm(p[:, None, :], z[:, :, None]).view(-1)
    return p, logp, ent


class TokenLogProb(torch.autograd.Function):
    """(logp, entropy) of ``targets`` (N,) under ``softmax(logits / temperature)``, logits (N, vocab); the entropy
    (None unless asked for) is for logging and has no gradient."""

    @staticmethod
    def forward(ctx, logits, targets, temperature: float, entropy: bool):
        z = logits.float()
        p, logp, ent = _softmax_stats(z / temperature if temperature != 1.0 else z, targets, entropy)
        if ent is not None:
            ctx.mark_non_differentiable(ent)
        ctx.save_for_backward(p, targets)
        ctx.temperature, ctx.dtype = temperature, logits.dtype
        return logp, ent

    @staticmethod
    def backward(ctx, grad_logp, _grad_entropy):
        p, targets = ctx.saved_tensors
        return _logits_grad(p, targets, grad_logp.float() / ctx.temperature).to(ctx.dtype), None, None, None


class HeadLogProb(torch.autograd.Function):
    """(logp, entropy) of ``targets`` (N,) under ``softmax(hidden @ weight.T / temperature)``: the LM head (a linear
    layer without bias, weight (vocab, hidden)) and :class:`TokenLogProb` in one, whose backward gives ``hidden``
    its gradient as (W[y] - p W) * g / T: one matmul on the saved softmax, no (N, vocab) gradient. The weight gets
    a gradient only if it requires one (a frozen head, as with LoRA, does not)."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, temperature: float, entropy: bool):
        z = (hidden @ weight.t()).float()
        if temperature != 1.0:
            z.div_(temperature)
        p, logp, ent = _softmax_stats(z, targets, entropy)
        if ent is not None:
            ctx.mark_non_differentiable(ent)
        ctx.save_for_backward(p, hidden, weight, targets)
        ctx.temperature = temperature
        return logp, ent

    @staticmethod
    def backward(ctx, grad_logp, _grad_entropy):
        p, hidden, weight, targets = ctx.saved_tensors
        g = (grad_logp.float() / ctx.temperature)[:, None]
        grad_hidden = grad_weight = None
        if ctx.needs_input_grad[0]:
            own = weight[targets].float()
            if weight.dtype == torch.float32:
                grad_hidden = (own - p @ weight) * g
            else:           # bf16 would round p[y] = 0.99 to 0.988 and 1 - p[y] by 17 %: keep 1 - p[y] in float32
                rest = p.to(weight.dtype)
                rest[torch.arange(len(targets), device=p.device), targets] = 0
                grad_hidden = ((1 - p.gather(1, targets[:, None])) * own - (rest @ weight).float()) * g
            grad_hidden = grad_hidden.to(hidden.dtype)
        if ctx.needs_input_grad[1]:
            dz = _logits_grad(p, targets, g.squeeze(1))
            grad_weight = (dz.t().to(hidden.dtype) @ hidden).to(weight.dtype)
        return grad_hidden, grad_weight, None, None, None


def head_logp(hidden: torch.Tensor, head: torch.nn.Module, targets: torch.Tensor, temperature: float = 1.0,
              entropy: bool = True):
    """:func:`token_logp` of ``head(hidden)`` (hidden (N, d)), through :class:`HeadLogProb` where ``head`` is a
    plain linear layer without bias, else through the head's own forward."""
    if type(head) is not torch.nn.Linear or head.bias is not None:
        return token_logp(head(hidden), targets, temperature, entropy)
    if hidden.dim() != 2 or targets.shape != hidden.shape[:1]:
        raise ValueError(f"hidden must be (N, d) and targets (N,); got {tuple(hidden.shape)} and "
                         f"{tuple(targets.shape)}")
    return HeadLogProb.apply(hidden, head.weight, targets, float(temperature) if temperature > 0 else 1.0, entropy)


def token_logp(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0, entropy: bool = True):
    """(log-prob of each target, entropy or None), both (N,) float32, from ``logits`` (N, vocab) divided by
    ``temperature`` (0 or 1: as they are); with autograd through the log-prob. See :class:`TokenLogProb`."""
    if logits.dim() != 2 or targets.shape != logits.shape[:1]:
        raise ValueError(f"logits must be (N, vocab) and targets (N,); got {tuple(logits.shape)} and "
                         f"{tuple(targets.shape)}")
    return TokenLogProb.apply(logits, targets, float(temperature) if temperature > 0 else 1.0, entropy)
