"""Each answer token's log-prob, and the entropy of its next-token distribution, from the LM head's logits: the
largest tensors of a rung-3 update ((answer tokens) x 49,152 vocabulary entries, 200 MB in float32 for a
micro-batch of 1,000 tokens).

The ratio in the clipped surrogate (BAPO Eq. 3) needs log pi(y_t | context) = z[y_t] - logsumexp(z)
and its gradient, dlogp/dz = onehot(y_t) - softmax(z). ``log_softmax`` then ``gather`` gets there through a log-prob
tensor for every vocabulary entry, a zero-filled one for the gather's gradient and a third for the log-softmax's;
:class:`TokenLogProb` keeps none: it saves the logits it was given and their logsumexp, works a chunk of rows at a
time in one reused buffer, and its backward remakes the softmax from them the same way. :class:`HeadLogProb` starts
one step earlier, from the hidden states h under the head's weight W (z = h W^T), and makes the gradient the head's
backward needs, dlogp/dh = (W[y] - p W) / T, without the (N, vocab) gradient of the logits.

    z = logits / T;  p = softmax(z);  logp = z[y] - logsumexp(z);  entropy = logsumexp(z) - sum(p * z)
    backward: dz = g * (onehot(y) - p) / T;   from h: dh = g * (W[y] - p W) / T
"""
from __future__ import annotations

import torch

CHUNK_BYTES = 24 << 20      # work per chunk of rows: 128 rows of a 49,152 vocabulary in float32


def row_chunks(n: int, width: int, itemsize: int = 4) -> tuple[int, list[slice]]:
    """(rows of the largest chunk, the row slices) of ``n`` rows whose (rows, width) work of ``itemsize`` bytes a
    value fits :data:`CHUNK_BYTES`. Each chunk's work goes into one buffer reused for every chunk: a fresh
    vocabulary-sized float32 tensor (543 MB for 2,765 answer tokens) can cost more in page faults than its arithmetic
    (up to 1.4 s against 0.1 s for an exp over it on a 2-core EPYC), and a second one doubles the memory."""
    rows = max(1, CHUNK_BYTES // (itemsize * width))
    return min(rows, n), [slice(i, min(i + rows, n)) for i in range(0, n, rows)]


def scaled_rows(buf: torch.Tensor, rows: torch.Tensor, temperature: float) -> torch.Tensor:
    """``rows`` / ``temperature`` in float32, written into ``buf`` (a chunk's reused buffer; temperature 1: as they
    are, with no pass to divide)."""
    buf.copy_(rows)
    return buf.div_(temperature) if temperature != 1.0 else buf


def _stats(logits, vocab: int, targets, temperature: float, entropy: bool):
    """(logp of targets, logsumexp, entropy or None), each (N,) float32, of ``softmax(z / temperature)``, where
    ``logits(rows)`` gives the rows' logits z (N, vocab; any float dtype), a chunk at a time."""
    n = len(targets)
    rows, chunks = row_chunks(n, vocab)
    zs, e = torch.empty(2, rows, vocab, device=targets.device)
    logp, lse = torch.empty(2, n, device=targets.device)
    ent = torch.empty(n, device=targets.device) if entropy else None
    for c in chunks:
        z, ex = scaled_rows(zs[:c.stop - c.start], logits(c), temperature), e[:c.stop - c.start]
        top = z.max(-1, keepdim=True).values
        z.sub_(top)                                             # z - max: exp(z) <= 1
        total = torch.exp(z, out=ex).sum(-1).log_()
        logp[c] = z.gather(1, targets[c, None]).squeeze(1) - total
        lse[c] = top.squeeze(1) + total
        if entropy:                 # log(total) - sum(p * z), one (1 x V) @ (V x 1) product per row: no temporary
            ent[c] = total - torch.bmm(ex[:, None, :], z[:, :, None]).view(-1) / total.exp()
    return logp, lse, ent


def _probs(logits, lse, temperature: float):
    """(rows, p = softmax(z / temperature) of those rows, float32) chunk by chunk, from the logits the forward kept
    and its logsumexp: exp(z / T - lse), the forward's softmax to the last bit or two. The buffer is reused."""
    rows, chunks = row_chunks(*logits.shape)
    buf = torch.empty(rows, logits.shape[1], device=logits.device)
    for c in chunks:
        yield c, scaled_rows(buf[:c.stop - c.start], logits[c], temperature).sub_(lse[c, None]).exp_()


def _logits_grad(p, targets, g):
    """g * (onehot(targets) - p), float32 (n, V), in ``p``'s buffer: the logits' gradient from the log-probs' (n,)."""
    dz = p.mul_(-g[:, None])
    dz[torch.arange(len(targets), device=dz.device), targets] += g
    return dz


class TokenLogProb(torch.autograd.Function):
    """(logp, entropy) of ``targets`` (N,) under ``softmax(logits / temperature)``, logits (N, vocab); the entropy
    (None unless asked for) is for logging and has no gradient. Keeps the logits it was given and the logsumexp
    (no float32 copy of its own); the backward remakes the softmax a chunk of rows at a time."""

    @staticmethod
    def forward(ctx, logits, targets, temperature: float, entropy: bool):
        logp, lse, ent = _stats(lambda c: logits[c], logits.shape[1], targets, temperature, entropy)
        if ent is not None:
            ctx.mark_non_differentiable(ent)
        ctx.save_for_backward(logits, lse, targets)
        ctx.temperature = temperature
        return logp, ent

    @staticmethod
    def backward(ctx, grad_logp, _grad_entropy):
        logits, lse, targets = ctx.saved_tensors
        g = grad_logp.float() / ctx.temperature
        grad = torch.empty_like(logits)
        for c, p in _probs(logits, lse, ctx.temperature):
            grad[c] = _logits_grad(p, targets[c], g[c])
        return grad, None, None, None


class HeadLogProb(torch.autograd.Function):
    """(logp, entropy) of ``targets`` (N,) under ``softmax(hidden @ weight.T / temperature)``: the LM head (a linear
    layer without bias, weight (vocab, hidden)) and :class:`TokenLogProb` in one, whose backward gives ``hidden``
    its gradient as (W[y] - p W) * g / T: one matmul on the softmax, no (N, vocab) gradient. The weight gets
    a gradient only if it requires one (a frozen head, as with LoRA, does not).

    With a gradient to make it keeps the logits in the head's dtype (bf16 logits are what the bf16 matmul wrote:
    nothing is lost) and remakes the softmax from them a chunk of rows at a time. Without (scoring old log-probs,
    ``torch.no_grad``) it keeps nothing: each chunk's logits go into one reused buffer."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, temperature: float, entropy: bool):
        keep, vocab = any(ctx.needs_input_grad[:2]), weight.shape[0]
        rows = len(targets) if keep else row_chunks(len(targets), vocab)[0]
        z = torch.empty(rows, vocab, dtype=weight.dtype, device=weight.device)
        # the same products either way (a chunk of rows each), so that scoring without a gradient gives the numbers
        # of the update's own pass to the last bit: a rescored batch trained on policy sees ratios of exactly 1
        logits = lambda c: torch.mm(hidden[c], weight.t(), out=z[c] if keep else z[:c.stop - c.start])
        logp, lse, ent = _stats(logits, vocab, targets, temperature, entropy)
        if ent is not None:
            ctx.mark_non_differentiable(ent)
        if keep:
            ctx.save_for_backward(z, lse, hidden, weight, targets)
        ctx.temperature = temperature
        return logp, ent

    @staticmethod
    def backward(ctx, grad_logp, _grad_entropy):
        z, lse, hidden, weight, targets = ctx.saved_tensors
        g = (grad_logp.float() / ctx.temperature)[:, None]
        grad_hidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        grad_weight = torch.zeros(weight.shape, device=weight.device) if ctx.needs_input_grad[1] else None
        for c, p in _probs(z, lse, ctx.temperature):
            t, gc = targets[c], g[c]
            if grad_hidden is not None:
                own = weight[t].float()
                if weight.dtype == torch.float32:
                    grad_hidden[c] = (own - p @ weight) * gc
                else:       # bf16 would round p[y] = 0.99 to 0.988 and 1 - p[y] by 17 %: keep 1 - p[y] in float32
                    rest = p.to(weight.dtype)
                    rest[torch.arange(len(t), device=p.device), t] = 0
                    grad_hidden[c] = ((1 - p.gather(1, t[:, None])) * own - (rest @ weight).float()) * gc
            if grad_weight is not None:
                grad_weight += (_logits_grad(p, t, gc.squeeze(1)).t().to(hidden.dtype) @ hidden[c]).float()
        return grad_hidden, None if grad_weight is None else grad_weight.to(weight.dtype), None, None, None


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
