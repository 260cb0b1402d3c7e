"""Benchmark: the two vocabulary-wide steps of rung 3, each against what it replaced, side by side in one run.

1. the draw of one decoding step over SmolLM2's 49,152 tokens (``toy_rl.lm.decode.next_token``: inverse transform
   sampling, one uniform per row, and the token's log-prob without a log-softmax) against the exponential race it
   replaced (log-softmax, argmax(p / E) with E = -log U drawn per entry, then a gather);
2. an update's LM head with its log-probs and entropies, forward and backward into the hidden states
   (``toy_rl.lm.logprob.head_logp``: one autograd function, the softmax its only vocabulary-sized tensor) against
   the head, then log_softmax, gather and the entropy under no_grad.

Random weights of SmolLM2's head shape (49,152 x 576) and random hidden states; both sides give the same numbers
(printed). Run: python bench/bench_head_and_draw.py [--repeats 5 --threads 1]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from bench_bf16 import interleaved, torch_machine_line

VOCAB, HIDDEN = 49_152, 576


def race_draw(logits, generator):
    """The replaced draw: log-softmax, argmax(p / E) with E = -log U per entry, the token's log-prob gathered."""
    logp_all = F.log_softmax(logits.float(), dim=-1)
    noise = torch.empty_like(logp_all).uniform_(generator=generator).log_().neg_()
    tok = (logp_all.exp() / noise).argmax(-1)
    return tok, logp_all.gather(1, tok[:, None]).squeeze(1)


def head_then_log_softmax(hidden, head, targets):
    """The replaced scoring: the head's logits, log_softmax, gather; the entropy without a graph."""
    logp_all = F.log_softmax(head(hidden).float(), dim=-1)
    with torch.no_grad():
        ent = -(logp_all.exp() * logp_all).sum(-1)
    return logp_all.gather(1, targets[:, None]).squeeze(1), ent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from toy_rl.lm.decode import next_token
    from toy_rl.lm.logprob import head_logp
    print(torch_machine_line())
    torch.manual_seed(0)
    print("\n| step | rows | before ms | now ms | before / now |\n|---|---|---|---|---|")
    for rows in (64, 192):
        logits = torch.randn(rows, VOCAB) * 3
        live, gen = torch.ones(rows, dtype=torch.bool), torch.Generator().manual_seed(0)
        secs = interleaved({"before": lambda: race_draw(logits, gen),
                            "now": lambda: next_token(logits, 1.0, live, gen)}, args.repeats)
        print(f"| draw and its log-prob | {rows} | {secs['before'] * 1e3:.1f} | {secs['now'] * 1e3:.1f} | "
              f"{secs['before'] / secs['now']:.2f}x |")
    head = torch.nn.Linear(HIDDEN, VOCAB, bias=False).requires_grad_(False)
    for rows in (304, 1000):
        hidden, targets = torch.randn(rows, HIDDEN), torch.randint(0, VOCAB, (rows,))
        weights = torch.randn(rows)
        grads = {}

        def run(name, fn):
            h = hidden.clone().requires_grad_()
            logp, ent = fn(h, head, targets)
            (logp * weights).sum().backward()
            grads[name] = logp.detach(), ent, h.grad
        secs = interleaved({"before": lambda: run("before", head_then_log_softmax),
                            "now": lambda: run("now", head_logp)}, args.repeats)
        print(f"| head, log-probs, entropy: forward + backward | {rows} | {secs['before'] * 1e3:.0f} | "
              f"{secs['now'] * 1e3:.0f} | {secs['before'] / secs['now']:.2f}x |")
        diff = [float((a - b).abs().max()) for a, b in zip(grads["before"], grads["now"])]
        print(f"|  max difference: log-prob {diff[0]:.1e}, entropy {diff[1]:.1e}, gradient {diff[2]:.1e} | | | | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
