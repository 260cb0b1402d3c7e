"""Benchmark: one SmolLM2 attention call of a rung-3 update in bf16 on the CPU, transformers' SDPA path (keys and
values repeated per query head, SDPA's math backend) against :func:`toy_rl.lm.attention.grouped_attention`, side by
side in one run (interleaved, medians), forward alone and forward + backward.

The default shape is what the profile of a ``search-hard-warm`` update shows: a micro-batch of 16 answers packed
into 8 rows of 95 tokens, each attending its 133-token prompt and its row (228 keys), 9 query heads sharing 3
key/value heads of 64 dimensions; every one of SmolLM2's 30 layers makes such a call per micro-batch, 4
micro-batches an update. Run: python bench/bench_attention.py [--rows 8 --queries 95 --keys 228 --repeats 20]
"""
from __future__ import annotations

import argparse

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench_bf16 import interleaved, torch_machine_line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--queries", type=int, default=95)
    ap.add_argument("--keys", type=int, default=228)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if min(args.rows, args.queries, args.repeats, args.threads) < 1 or args.keys < args.queries:
        ap.error("--rows, --queries, --repeats, --threads must be >= 1 and --keys >= --queries")
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from toy_rl.lm.attention import grouped_attention
    torch.set_num_threads(args.threads)
    print(torch_machine_line())
    B, H, K, L, S, D = args.rows, 9, 3, args.queries, args.keys, 64

    class Layer(torch.nn.Module):           # what transformers' attention functions read from the layer
        is_causal, num_key_value_groups = True, H // K
    layer, g = Layer(), torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, n, m, D, generator=g).bfloat16().requires_grad_() for n, m in ((H, L), (K, S), (K, S)))
    mask = torch.ones(L, S, dtype=torch.bool).tril(S - L).expand(B, 1, L, S)

    def sdpa():
        with sdpa_kernel(SDPBackend.MATH):
            return sdpa_attention_forward(layer, q, k, v, mask, scaling=D ** -0.5)[0]

    def grouped():
        return grouped_attention(layer, q, k, v, mask, scaling=D ** -0.5)[0]

    def forward(fn):
        def run():
            with torch.no_grad():
                fn()
        return run

    def backward(fn):
        return lambda: fn().float().sum().backward()
    print(f"bf16 attention of {B} rows x {L} queries over {S} keys, {H} query heads on {K} key/value heads of {D} "
          f"dimensions; medians of {args.repeats}, interleaved\n\n| pass | SDPA path ms | grouped ms | SDPA / grouped |"
          "\n|---|---|---|---|")
    for name, wrap in (("forward", forward), ("forward + backward", backward)):
        t = interleaved({"sdpa": wrap(sdpa), "grouped": wrap(grouped)}, args.repeats)
        print(f"| {name} | {1e3 * t['sdpa']:.2f} | {1e3 * t['grouped']:.2f} | {t['sdpa'] / t['grouped']:.2f}x |")
    with torch.no_grad():
        gap = (sdpa().float() - grouped().float()).abs().max().item()
    print(f"\nlargest |difference| of the outputs: {gap:.2e} (bf16 values of magnitude ~1: the last bit)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
