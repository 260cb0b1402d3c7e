"""Benchmark: bfloat16 against float32 on this CPU, side by side in one run, for the work rung 3 does.

What it times, each pair interleaved (fp32, bf16, fp32, bf16, ...) and reported as the ratio of medians:

1. a matmul of rung 3's shape (2048 x 576 @ 576 x 1536, SmolLM2-135M's MLP): GFLOP/s of each dtype, the peak
   a compute path of that dtype can hope for on this machine;
2. SmolLM2-135M's forward on a batch of sequences (scoring: what the old and new log-probs cost);
3. the same forward plus a backward to the activations (the update with frozen weights, as LoRA trains).

Whether bf16 is worth a compute path here is a question of ratios, not of the CPU's name: a CPU with AMX-BF16 or
AVX512-BF16 (``lscpu`` flags, printed) runs bf16 matmuls on dedicated units. The numbers go into
``toy_rl.lm.estimate`` only as measured here. Run: python bench/bench_bf16.py [--batch 16 --tokens 160]
(needs the llm extra and the SmolLM2 weights for parts 2-3; part 1 runs anywhere).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import torch

DTYPES = (torch.float32, torch.bfloat16)


def cpu_info() -> tuple[str, str]:
    """(the CPU's model name, its bf16-related flags) as Linux reports them, or 'unknown'."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown", "unknown"
    field = lambda key: next((line.split(":", 1)[1].strip() for line in lines if line.startswith(key)), "")
    found = sorted({f for f in field("flags").split() if f.startswith(("amx", "avx512_bf16", "avx512f"))})
    return field("model name") or "unknown", ", ".join(found) or "none of amx / avx512_bf16"


def torch_machine_line() -> str:
    """One line: the machine, its bf16 flags, the torch threads in use and torch's build (rung-3 benches)."""
    import os
    import torch
    cpu, flags = cpu_info()
    return (f"machine: {platform.machine()}, {cpu}, {torch.get_num_threads()} of {os.cpu_count()} cores in use; "
            f"bf16 flags: {flags}; torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()})")


def lm_bench_start(threads: int) -> bool:
    """For a rung-3 bench: False (printed) when the llm extras are missing; else set torch's threads, print
    :func:`torch_machine_line` and return True."""
    import torch
    from toy_rl.lm.load import llm_missing
    if llm_missing():
        print(f"skipped: {llm_missing()}")
        return False
    torch.set_num_threads(threads)
    print(torch_machine_line())
    return True


def interleaved(fns: dict, repeats: int, warmup: int = 2) -> dict:
    """{name: median seconds} of each function, run in turn ``repeats`` times after ``warmup`` rounds."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def matmul(repeats: int, dtypes=DTYPES) -> dict:
    """{dtype: GFLOP/s} of a matmul of rung 3's shape (SmolLM2-135M's MLP), each dtype in turn."""
    m, k, n = 2048, 576, 1536
    pairs = {dt: (torch.randn(m, k, dtype=dt), torch.randn(k, n, dtype=dt)) for dt in dtypes}
    secs = interleaved({dt: (lambda a=a, b=b: a @ b) for dt, (a, b) in pairs.items()}, repeats)
    return {dt: 2 * m * k * n / s / 1e9 for dt, s in secs.items()}          # GFLOP/s


def smollm2(batch: int, tokens: int, repeats: int) -> dict | None:
    """{(part, dtype): median seconds} for the forward and forward + backward, or None without the llm extra."""
    from toy_rl.lm.load import llm_missing, load_model
    if llm_missing():
        print(f"SmolLM2 parts skipped: {llm_missing()}")
        return None
    models = {dt: load_model(dtype=dt, device="cpu")[0] for dt in DTYPES}
    for model in models.values():
        model.requires_grad_(False)
    ids = torch.randint(0, models[torch.float32].config.vocab_size, (batch, tokens))

    def forward(model):
        with torch.no_grad():
            model(input_ids=ids).logits.float().log_softmax(-1)

    def forward_backward(model):
        embeds = model.get_input_embeddings()(ids).detach().requires_grad_(True)
        model(inputs_embeds=embeds).logits.float().log_softmax(-1)[..., 0].sum().backward()

    out = {}
    for part, fn in (("forward", forward), ("forward + backward", forward_backward)):
        secs = interleaved({dt: (lambda m=m: fn(m)) for dt, m in models.items()}, repeats, warmup=1)
        out.update({(part, dt): s for dt, s in secs.items()})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=16, help="sequences per SmolLM2 pass (default 16)")
    ap.add_argument("--tokens", type=int, default=160, help="tokens per sequence (default 160)")
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds per part (default 5; the matmul: x10)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the runs use)")
    ap.add_argument("--matmul-only", action="store_true", help="part 1 only (no model needed)")
    args = ap.parse_args()
    if min(args.batch, args.tokens, args.repeats, args.threads) < 1:
        ap.error("--batch, --tokens, --repeats and --threads must be at least 1")
    torch.set_num_threads(args.threads)
    model, flags = cpu_info()
    print(f"machine: {platform.machine()}, {model}, {torch.get_num_threads()} of {os.cpu_count()} cores in use; "
          f"bf16 flags: {flags}; "
          f"torch {torch.__version__}")
    peak = matmul(10 * args.repeats)
    print(f"matmul 2048x576 @ 576x1536: float32 {peak[torch.float32]:.0f} GFLOP/s, bfloat16 "
          f"{peak[torch.bfloat16]:.0f} GFLOP/s, bf16 / fp32 = {peak[torch.bfloat16] / peak[torch.float32]:.1f}x")
    if args.matmul_only:
        return 0
    parts = smollm2(args.batch, args.tokens, args.repeats)
    if parts is None:
        return 0
    for part in ("forward", "forward + backward"):
        fp32, bf16 = parts[part, torch.float32], parts[part, torch.bfloat16]
        print(f"SmolLM2-135M {part}, {args.batch} x {args.tokens} tokens: float32 {fp32:.2f} s, bfloat16 {bf16:.2f} s,"
              f" fp32 / bf16 = {fp32 / bf16:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
