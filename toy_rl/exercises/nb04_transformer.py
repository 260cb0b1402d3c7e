"""Exercises of notebook 04 (the arithmetic transformer): the log-probs of answer tokens from a model's logits,
and the two ways of averaging a per-token loss over the answer tokens."""
from __future__ import annotations

import torch

from . import register
from .framework import Case, Exercise, Mistake, close

NB = "04_arithmetic_transformer"
F64 = torch.float64


# ----------------------------------------------------------------------------- log-probs of the answer tokens

def _logit_cases():
    V = 5
    uniform = torch.zeros(1, 4, V, dtype=F64)
    ids = torch.tensor([[0, 3, 1, 4]])
    peaked = torch.zeros(1, 4, V, dtype=F64)
    peaked[0, 0, 3] = peaked[0, 1, 1] = peaked[0, 2, 4] = 4.0    # each position bets on the *next* token
    peaked[0, 3, 2] = 9.0                                          # the last position predicts past the end
    g = torch.Generator().manual_seed(401)
    two = torch.randn(2, 6, V, generator=g, dtype=F64)
    padded = torch.tensor([[4, 4, 0, 2, 3, 1], [0, 1, 2, 3, 3, 1]])       # row 0 left-padded with id 4
    cases = [
        Case("uniform logits", (uniform, ids, 1, 1.0),
             note="every token has probability 1/V, so every log-prob is −log V"),
        Case("each position predicts the next token", (peaked, ids, 1, 1.0),
             note="the logits at position t − 1 are the distribution of token t: here they put 4 nats on it"),
        Case("the answer starts later", (peaked, ids, 2, 1.0),
             note="start = 2: score tokens 2 and 3 only (the prompt's tokens are given, not sampled)"),
        Case("temperature 0.5", (two, padded, 3, 0.5),
             note="the sampler divided the logits by the temperature before the softmax: score the same way"),
        Case("temperature 2", (two, padded, 3, 2.0)),
        Case("a left-padded batch", (two, padded, 2, 1.0),
             note="padded rows are scored like any other; the response mask removes what must not count"),
    ]
    for i in range(6):
        B, L, Vr = (int(torch.randint(lo, hi, (1,), generator=g)) for lo, hi in ((1, 5), (3, 10), (3, 12)))
        logits = 2 * torch.randn(B, L, Vr, generator=g, dtype=F64)
        input_ids = torch.randint(0, Vr, (B, L), generator=g)
        start = int(torch.randint(1, L, (1,), generator=g))
        temperature = (1.0, 0.7, 1.3)[i % 3]
        cases.append(Case(f"random batch #{i + 1} ({B} x {L}, V = {Vr}, T = {temperature})",
                          (logits, input_ids, start, temperature), random=True))
    return cases


def _gather(logp_all, input_ids, start):
    return logp_all.gather(-1, input_ids[:, start:].unsqueeze(-1)).squeeze(-1)


def _no_shift(logits, input_ids, start, temperature=1.0):
    return _gather(torch.log_softmax(logits[:, start:] / temperature, -1), input_ids, start)


def _reads_not_predicts(logits, input_ids, start, temperature=1.0):
    logp_all = torch.log_softmax(logits[:, start - 1:-1] / temperature, -1)
    return logp_all.gather(-1, input_ids[:, start - 1:-1].unsqueeze(-1)).squeeze(-1)


def _no_temperature(logits, input_ids, start, temperature=1.0):
    return _gather(torch.log_softmax(logits[:, start - 1:-1], -1), input_ids, start)


def _temperature_after(logits, input_ids, start, temperature=1.0):
    return _gather(torch.log_softmax(logits[:, start - 1:-1], -1) / temperature, input_ids, start)


def _times_temperature(logits, input_ids, start, temperature=1.0):
    return _gather(torch.log_softmax(logits[:, start - 1:-1] * temperature, -1), input_ids, start)


def _probabilities(logits, input_ids, start, temperature=1.0):
    return _gather(torch.softmax(logits[:, start - 1:-1] / temperature, -1), input_ids, start)


def _raw_logits(logits, input_ids, start, temperature=1.0):
    return _gather(logits[:, start - 1:-1] / temperature, input_ids, start)


def _softmax_over_positions(logits, input_ids, start, temperature=1.0):
    return _gather(torch.log_softmax(logits[:, start - 1:-1] / temperature, 1), input_ids, start)


def _like_the_scoring_pass(fn):
    """On a randomly initialised GPT, left-padded prompts: fn(logits, ...) vs toy_rl.arithmetic.model.scoring."""
    from ..arithmetic.model import GPT, ModelConfig, encode, left_pad, token_logprobs
    torch.manual_seed(404)
    model = GPT(ModelConfig(n_layer=1, n_head=2, d_model=32, block_size=32)).double().eval()
    rows = [encode(t) for t in ("12+34=46", "7-3=4", "99+1=100")]
    input_ids, mask = left_pad(rows)
    start = 4
    for temperature in (1.0, 0.8):
        with torch.no_grad():
            expected = token_logprobs(model, input_ids, mask, start, temperature=temperature)
            got = fn(model(input_ids, mask), input_ids.clone(), start, temperature)
        ok, detail = close(rtol=1e-5, atol=1e-5)(expected, got)          # the library scores in float32
        if not ok:
            return False, f"on a real GPT's logits (temperature {temperature}) you differ from " \
                          f"toy_rl.arithmetic.model.scoring.token_logprobs: {detail}"
    return True, ("on a real (randomly initialised) GPT's logits, left padding included, your log-probs equal "
                  "those of toy_rl.arithmetic.model.scoring.token_logprobs, the scoring pass of every RL update")


# ----------------------------------------------------------------------------- averaging over the answer tokens

def _agg_cases():
    M = lambda rows: torch.tensor(rows, dtype=F64)                # noqa: E731
    long_wrong = (M([[1.0, 1.0, 7.0, 7.0, 7.0, 7.0], [-0.5, -0.5, -0.5, -0.5, -0.5, -0.5]]),
                  M([[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]]))
    equal = (M([[0.2, -0.4, 0.9], [1.5, 0.3, -2.0]]), M([[1, 1, 1], [1, 1, 1]]))
    empty = (M([[0.5, 0.1, 3.0], [9.0, 9.0, 9.0], [-1.0, 2.0, 4.0]]), M([[1, 1, 0], [0, 0, 0], [1, 1, 1]]))
    cases = [
        Case("equal lengths, no padding (token-mean)", (*equal, "token-mean")),
        Case("equal lengths, no padding (seq-mean-token-mean)", (*equal, "seq-mean-token-mean"),
             note="with every sequence the same length the two averages agree"),
        Case("a short right answer, a long wrong one (token-mean)", (*long_wrong, "token-mean"),
             note="the padding holds garbage (7.0), as a scored pad token does: only masked-in tokens count"),
        Case("a short right answer, a long wrong one (seq-mean-token-mean)", (*long_wrong, "seq-mean-token-mean"),
             note="mean over each sequence's own tokens first, then over the sequences"),
        Case("a sequence with no tokens (seq-mean-token-mean)", (*empty, "seq-mean-token-mean"),
             note="a sequence with no answer tokens has no mean: it is left out, not counted as 0"),
        Case("a sequence with no tokens (token-mean)", (*empty, "token-mean")),
    ]
    g = torch.Generator().manual_seed(402)
    for i in range(6):
        B, T = int(torch.randint(1, 7, (1,), generator=g)), int(torch.randint(2, 12, (1,), generator=g))
        values = torch.randn(B, T, generator=g, dtype=F64)
        lengths = torch.randint(1, T + 1, (B,), generator=g)
        mask = (torch.arange(T)[None] < lengths[:, None]).to(F64)         # right-padded answers
        agg = ("token-mean", "seq-mean-token-mean")[i % 2]
        cases.append(Case(f"random batch #{i + 1} ({B} x {T}, {agg})", (values, mask, agg), random=True))
    return cases


def _with_padding(values, mask, agg="token-mean"):
    return values.mean() if agg == "token-mean" else values.mean(-1).mean()


def _unmasked_values(values, mask, agg="token-mean"):
    if agg == "token-mean":
        return values.sum() / mask.sum()
    n = mask.sum(-1)
    return (values.sum(-1)[n > 0] / n[n > 0]).mean()


def _swapped(values, mask, agg="token-mean"):
    n = mask.sum(-1)
    if agg == "token-mean":
        return ((values * mask).sum(-1)[n > 0] / n[n > 0]).mean()
    return (values * mask).sum() / mask.sum()


def _always_token_mean(values, mask, agg="token-mean"):
    return (values * mask).sum() / mask.sum()


def _always_seq_mean(values, mask, agg="token-mean"):
    n = mask.sum(-1)
    return ((values * mask).sum(-1)[n > 0] / n[n > 0]).mean()


def _divides_by_width(values, mask, agg="token-mean"):
    if agg == "token-mean":
        return (values * mask).sum() / mask.sum()
    return ((values * mask).sum(-1) / mask.shape[-1]).mean()


def _empty_counts_as_zero(values, mask, agg="token-mean"):
    if agg == "token-mean":
        return (values * mask).sum() / mask.sum()
    return ((values * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()


def _like_policy_loss(fn):
    """At r = 1 the surrogate is A per token: −policy_loss is the aggregate of the advantages."""
    from ..clipping import Symmetric, policy_loss
    g = torch.Generator().manual_seed(405)
    for agg in ("token-mean", "seq-mean-token-mean"):
        for _ in range(3):
            logp = -torch.rand(6, 9, generator=g, dtype=F64)
            adv = torch.randn(6, 1, generator=g, dtype=F64).expand(6, 9).clone()      # one advantage per answer
            mask = (torch.arange(9)[None] < torch.randint(1, 10, (6, 1), generator=g)).to(F64)
            loss, _ = policy_loss(logp, logp.clone(), adv, mask, Symmetric(), agg=agg)
            ok, detail = close(rtol=1e-9, atol=1e-12)(-loss.detach(), fn(adv.clone(), mask.clone(), agg))
            if not ok:
                return False, (f"applied to the advantages of an on-policy batch ({agg}) it is not −policy_loss: "
                               f"{detail}")
    return True, ("on on-policy batches (r = 1, so the surrogate is A per token) your average of the advantages "
                  "is −toy_rl.clipping.policy_loss for both agg settings")


register(
    Exercise(
        name="token_logprobs_from_logits", notebook=NB,
        title="the log-prob of each answer token from a model's logits (shift by one, temperature, log-softmax)",
        solution="toy_rl.solutions.nb04:token_logprobs_from_logits",
        cases=_logit_cases,
        nudge="token t's distribution is the log-softmax (over the vocabulary, the last axis) of the logits at "
              "position t − 1, divided by the temperature first; pick the entry of token input_ids[:, t] "
              "(torch.gather on the last axis) for t = start .. L − 1.",
        mistakes=(
            Mistake(_no_shift, "the logits at position t predict token t + 1, not token t: the distribution of "
                               "token t is read at position t − 1 (logits[:, start - 1:-1])."),
            Mistake(_reads_not_predicts, "you shifted the logits but also the tokens: the logits at t − 1 give the "
                                         "probability of the token at t, so gather input_ids[:, start:]."),
            Mistake(_no_temperature, "divide the logits by the temperature before the softmax: the sampler drew the "
                                     "tokens from softmax(logits / T), and the ratio needs the same probabilities."),
            Mistake(_temperature_after, "the temperature divides the logits *before* the log-softmax; dividing the "
                                        "log-probs afterwards does not give a distribution."),
            Mistake(_times_temperature, "divide by the temperature, do not multiply: T < 1 sharpens the distribution."),
            Mistake(_probabilities, "return log-probabilities (log_softmax), not probabilities: the ratio is "
                                    "exp(logp − old_logp)."),
            Mistake(_raw_logits, "normalise first: a logit is not a log-prob until the log-sum-exp over the "
                                 "vocabulary is subtracted (log_softmax)."),
            Mistake(_softmax_over_positions, "normalise over the vocabulary (the last axis, dim=-1), not over the "
                                             "positions."),
        ),
        compare=close(rtol=1e-6, atol=1e-9),
        extra=_like_the_scoring_pass,
    ),
    Exercise(
        name="masked_token_mean", notebook=NB,
        title="average a per-token loss over the answer tokens: token-mean vs seq-mean-token-mean",
        solution="toy_rl.solutions.nb04:masked_token_mean",
        cases=_agg_cases,
        nudge="token-mean: sum of values × mask over the whole batch, divided by the number of masked-in tokens. "
              "seq-mean-token-mean: for each sequence the sum of its masked-in values over its own token count, "
              "then the plain mean of those over the sequences that have at least one token.",
        mistakes=(
            Mistake(_with_padding, "padding is not part of the answer: average over the masked-in tokens only "
                                   "(values × mask, and divide by mask.sum(), not by the number of entries)."),
            Mistake(_unmasked_values, "you divided by the right count but summed the padding's values too: "
                                      "multiply by the mask before summing."),
            Mistake(_swapped, "the two are the other way round: token-mean pools all answer tokens of the batch "
                              "(long answers weigh more); seq-mean-token-mean averages each sequence first."),
            Mistake(_always_token_mean, "your token-mean is right, but agg=\"seq-mean-token-mean\" is another "
                                        "average: the mean of each answer over its own tokens first, then the mean "
                                        "over answers."),
            Mistake(_always_seq_mean, "your seq-mean-token-mean is right, but agg=\"token-mean\" pools every answer "
                                      "token of the batch into one mean (a long answer weighs more)."),
            Mistake(_divides_by_width, "divide each sequence's sum by its own number of tokens (mask.sum(-1)), not "
                                       "by the padded width: that is Dr. GRPO's seq-mean-token-sum-norm."),
            Mistake(_empty_counts_as_zero, "a sequence with no answer tokens has no mean: leave it out of the "
                                           "average over sequences instead of counting it as 0."),
        ),
        compare=close(rtol=1e-9, atol=1e-12),
        extra=_like_policy_loss,
    ),
)
