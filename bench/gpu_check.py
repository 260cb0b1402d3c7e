"""Rung 4 on a real GPU without downloading anything: a 7B-shaped model with random weights.

Builds Qwen2.5-7B-Instruct's architecture (toy_rl.lm.presets.SHAPES) in bf16
directly on the GPU, random weights, adds LoRA on attention + MLP and gradient
checkpointing (the ``qwen2.5-7b`` preset), and runs a few RL updates through the
same code as ``toy_rl.rl.loop.train`` -- ``BatchSource`` for rollouts,
``loop.update`` for the clipped update -- on a synthetic task over token ids
(no tokenizer: prompts are random ids; the reward is the share of answer tokens
in the lower half of the vocabulary, so groups get non-zero advantages). The
stop token is the last id, which a random model practically never samples:
answers run to ``--max-new-tokens``, a fixed amount of work per update.

It records per update: rollout and update seconds, generated tokens per second,
training tokens per second, ``torch.cuda.max_memory_allocated`` during the
rollout and during the update, and the clip statistics (on-policy, so the
ratio's spread is the sampling-vs-scoring numerics gap in bf16). It writes JSON
to ``--out`` and prints a Markdown row for the README, next to what
``toy_rl.lm.estimate`` predicted.

    python bench/gpu_check.py --out gpu_check.json                 # the 7B shape, on CUDA
    python bench/gpu_check.py --device cpu --layers 2 --hidden 256 --vocab 512 \\
        --prompts 2 --group-size 2 --max-new-tokens 8 --prompt-tokens 8  # seconds-long CPU smoke
"""
from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import torch

from toy_rl.arithmetic.tasks.base import Problem

SMOKE = ("--device cpu --layers 2 --hidden 256 --vocab 512 --prompts 2 --group-size 2 --max-new-tokens 8 "
         "--prompt-tokens 8")


class IdTokenizer:
    """Text is token ids written as decimal numbers separated by spaces ("17 4 99"). No BOS."""
    bos_token_id = unk_token_id = None
    chat_template = None

    def __init__(self, vocab: int):
        self.vocab = vocab
        self.eos_token_id = self.pad_token_id = vocab - 1

    def __call__(self, text, add_special_tokens=True):
        return type("Encoding", (), {"input_ids": [int(t) for t in text.split()]})()

    def __len__(self):
        return self.vocab

    def convert_tokens_to_ids(self, token):
        return None

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(str(int(i)) for i in ids)


class LowerHalfTask:
    """Prompts of random ids; reward = share of answer ids below vocab / 2 (about 0.5 for a random model,
    varying within a group, so advantages are non-zero)."""
    prompt_format = "plain"

    def __init__(self, vocab: int, prompt_tokens: int):
        self.vocab, self.prompt_tokens = vocab, prompt_tokens

    def sample(self, n, rng):
        rng = rng if isinstance(rng, random.Random) else random.Random(rng)
        return [Problem(" ".join(str(rng.randrange(self.vocab - 1)) for _ in range(self.prompt_tokens)), "")
                for _ in range(n)]

    def heldout(self, n):
        return self.sample(n, random.Random(1))

    def reward(self, problem, completion):
        ids = [int(t) for t in completion.split()]
        return sum(i < self.vocab // 2 for i in ids) / len(ids) if ids else 0.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu (for a smoke test)")
    p.add_argument("--layers", type=int, default=None, help="decoder layers (default: the 7B's 28)")
    p.add_argument("--hidden", type=int, default=None,
                   help="hidden size (default 3584); when set, heads are 64 wide, KV heads = heads / 2, and "
                        "the MLP keeps the 7B's ratio unless --intermediate says otherwise")
    p.add_argument("--intermediate", type=int, default=None, help="MLP width")
    p.add_argument("--vocab", type=int, default=None, help="vocabulary size (default 152064)")
    p.add_argument("--dtype", default=None, choices=("bfloat16", "float32"), help="default: bfloat16 (float32 on cpu)")
    p.add_argument("--steps", type=int, default=3, help="RL updates (the first includes warm-up)")
    p.add_argument("--prompts", type=int, default=None, help="prompts per update (default: the preset's 8)")
    p.add_argument("--group-size", type=int, default=None, help="answers per prompt (default: 8)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="answer length (default: 512)")
    p.add_argument("--prompt-tokens", type=int, default=None, help="prompt length (default: 256)")
    p.add_argument("--rank", type=int, default=None, help="LoRA rank (default 16)")
    p.add_argument("--no-checkpointing", action="store_true", help="keep all activations")
    p.add_argument("--rule", default="bapo", help="clipping rule (default %(default)s)")
    p.add_argument("--hardware", default="h200", help="estimate's hardware profile to compare with (default h200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="write the JSON record here")
    return p.parse_args(argv)


def build_shape(args) -> dict:
    from toy_rl.lm.presets import SHAPES
    shape = dict(SHAPES["qwen2.5-7b-instruct"])
    if args.hidden is not None:
        heads = max(1, args.hidden // 64)
        if args.hidden % heads:
            raise SystemExit(f"--hidden {args.hidden} must be a multiple of 64 (heads are 64 wide)")
        shape.update(hidden_size=args.hidden, num_attention_heads=heads, num_key_value_heads=max(1, heads // 2),
                     intermediate_size=args.intermediate or round(args.hidden * 18944 / 3584))
    elif args.intermediate is not None:
        shape["intermediate_size"] = args.intermediate
    if args.layers is not None:
        shape["num_hidden_layers"] = args.layers
    if args.vocab is not None:
        shape["vocab_size"] = args.vocab
    shape.pop("bos_token_id", None)
    shape["eos_token_id"] = shape["pad_token_id"] = shape["vocab_size"] - 1
    return shape


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def peak_gib(device, reset: bool = False) -> float | None:
    if device.type != "cuda":
        return None
    value = torch.cuda.max_memory_allocated(device) / 2 ** 30
    if reset:
        torch.cuda.reset_peak_memory_stats(device)
    return value


def main(argv=None) -> dict:
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_check: CUDA is not available on this machine (torch " + torch.__version__ + "). Run it where "
              "a GPU is, or try the small CPU smoke:\n  python bench/gpu_check.py " + SMOKE, file=sys.stderr)
        raise SystemExit(2)

    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    from toy_rl.clipping import make_rule
    from toy_rl.lm.dry_run import enable_gradient_checkpointing
    from toy_rl.lm.estimate import GIB, estimate
    from toy_rl.lm.lora import add_lora, count_trainable
    from toy_rl.lm.policy import HFPolicy
    from toy_rl.lm.presets import get_preset
    from toy_rl.rl.loop import make_optimizer, update
    from toy_rl.rl.sources import BatchSource

    dtype_name = args.dtype or ("bfloat16" if device.type == "cuda" else "float32")
    changes = {k: v for k, v in (("prompts", args.prompts), ("group_size", args.group_size),
                                 ("max_new_tokens", args.max_new_tokens), ("prompt_tokens", args.prompt_tokens),
                                 ("lora_rank", args.rank)) if v is not None}
    changes.update(dtype=dtype_name, gradient_checkpointing=not args.no_checkpointing,
                   share_prompts=args.no_checkpointing)
    preset = get_preset("qwen2.5-7b").replace(**changes)
    shape = build_shape(args)
    predicted = estimate(shape, preset, hardware=args.hardware)

    torch.manual_seed(args.seed)
    transformers.logging.set_verbosity_error()         # "use_cache=False under checkpointing": expected
    values = dict(shape)
    config = AutoConfig.for_model(values.pop("model_type"), **values)
    t0 = time.perf_counter()
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype_name))
    model.eval()
    model = add_lora(model, **preset.lora_kwargs())
    if preset.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    sync(device)
    build_s = time.perf_counter() - t0
    params = sum(p.numel() for p in model.parameters())
    vocab = shape["vocab_size"]
    policy = HFPolicy(model, IdTokenizer(vocab), stop_ids=[vocab - 1], share_prompts=preset.share_prompts)
    task = LowerHalfTask(vocab, preset.prompt_tokens)
    cfg = preset.rl_config(steps=args.steps, rule=args.rule, eval_every=0, seed=args.seed)
    source = BatchSource(policy, task, cfg.prompts, cfg.group_size, cfg.max_new_tokens, cfg.staleness, cfg.mode,
                         cfg.partial, cfg.temperature, cfg.advantage, cfg.seed)
    optimizer = make_optimizer(policy, cfg.lr)
    rule = make_rule(cfg.rule)
    peak_gib(device, reset=True)
    weights_gib = torch.cuda.memory_allocated(device) / GIB if device.type == "cuda" else None

    steps, nan = [], float("nan")
    for step in range(args.steps):
        sync(device)
        t0 = time.perf_counter()
        batch = source.next(step)
        sync(device)
        t1 = time.perf_counter()
        rollout_peak = peak_gib(device, reset=True)
        stats = update(policy, optimizer, batch, rule, cfg)
        sync(device)
        t2 = time.perf_counter()
        update_peak = peak_gib(device, reset=True)
        generated = int(batch.response_mask.sum())
        real_tokens = int(batch.attention_mask.sum())
        padded_tokens = int(batch.attention_mask.numel())
        record = {"step": step, "rollout_s": t1 - t0, "update_s": t2 - t1, "generated_tokens": generated,
                  "train_tokens": real_tokens, "train_tokens_padded": padded_tokens,
                  "gen_tokens_per_s": generated / (t1 - t0), "train_tokens_per_s": padded_tokens / (t2 - t1),
                  "rollout_peak_gib": rollout_peak, "update_peak_gib": update_peak,
                  "reward_mean": float(batch.rewards.mean())}
        record.update({k: float(stats[k]) for k in ("loss", "grad_norm", "entropy", "clip_frac_low",
                                                     "clip_frac_high", "ratio_min", "ratio_max", "approx_kl",
                                                     "c_low", "c_high") if k in stats})
        steps.append(record)
        print(f"step {step}: rollout {record['rollout_s']:.1f} s ({record['gen_tokens_per_s']:.0f} tok/s), update "
              f"{record['update_s']:.1f} s ({record['train_tokens_per_s']:.0f} tok/s)"
              + (f", peak {max(rollout_peak, update_peak):.1f} GiB" if rollout_peak is not None else "")
              + f", ratio in [{record.get('ratio_min', nan):.3f}, {record.get('ratio_max', nan):.3f}]",
              flush=True)

    timed = steps[1:] or steps                             # the first update includes warm-up
    med = lambda key: statistics.median(r[key] for r in timed)
    mem = [r[k] for r in steps for k in ("rollout_peak_gib", "update_peak_gib") if r[k] is not None]
    on_gpu = device.type == "cuda"
    summary = {"rollout_s": med("rollout_s"), "update_s": med("update_s"),
               "step_s": med("rollout_s") + med("update_s"), "gen_tokens_per_s": med("gen_tokens_per_s"),
               "train_tokens_per_s": med("train_tokens_per_s"), "max_memory_allocated_gib": max(mem) if mem else None,
               "rollout_peak_gib": max(r["rollout_peak_gib"] for r in steps) if on_gpu else None,
               "update_peak_gib": max(r["update_peak_gib"] for r in steps) if on_gpu else None,
               "weights_and_adapters_gib": weights_gib, "build_s": build_s}
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    record = {
        "device": device_name, "torch": torch.__version__, "transformers": transformers.__version__,
        "shape": shape, "params": params, "lora_params": count_trainable(model), "settings": preset.to_dict(),
        "rule": cfg.rule, "steps": steps, "summary": summary,
        "estimate": {"rollout_s": predicted["seconds"]["rollout"], "train_s": predicted["seconds"]["train"],
                     "train_peak_gib": predicted["memory"]["train_peak"] / GIB,
                     "rollout_peak_gib": predicted["memory"]["rollout_peak"] / GIB,
                     "hardware": args.hardware},
        "command": " ".join(sys.argv),
    }
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1))
        print(f"wrote {args.out}")
    print()
    print(markdown_header())
    print(markdown_row(record))
    return record


def markdown_header() -> str:
    return ("| device | model | batch (prompts x G x answer) | rollout s | gen tok/s | update s | train tok/s "
            "| peak GiB (rollout / update) | estimate GiB (rollout / update) |\n|---|---|---|---|---|---|---|---|---|")


def markdown_row(r: dict) -> str:
    s, st, e = r["summary"], r["settings"], r["estimate"]
    mem = lambda x: "-" if x is None else f"{x:.1f}"
    n = r["params"]
    size = f"{n / 1e9:.2f} B" if n >= 1e8 else f"{n / 1e6:.1f} M"
    model = (f"{size} random, {st['dtype']}, LoRA r{st['lora_rank']}"
             + (", ckpt" if st["gradient_checkpointing"] else ""))
    return (f"| {r['device']} | {model} | {st['prompts']} x {st['group_size']} x {st['max_new_tokens']} | "
            f"{s['rollout_s']:.1f} | {s['gen_tokens_per_s']:.0f} | {s['update_s']:.1f} | "
            f"{s['train_tokens_per_s']:.0f} | {mem(s['rollout_peak_gib'])} / {mem(s['update_peak_gib'])} | "
            f"{e['rollout_peak_gib']:.1f} / {e['train_peak_gib']:.1f} |")


if __name__ == "__main__":
    main()
