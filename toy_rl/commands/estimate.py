"""`toy-rl estimate`: memory and time of a LoRA RL run from a model's config alone (no weights).

No --smoke, --seeds or --steps: it trains nothing (--dry-run builds the model on the meta device in seconds)."""
from __future__ import annotations

from .common import CommonFlags, positive_float, positive_int, print_json

NAME = "estimate"
HELP = "estimate GPU memory and time per update for a LoRA RL preset (reads a config only; --dry-run checks it)"


def add_arguments(p):
    from ..lm.estimate import HARDWARE
    from ..lm.presets import preset_names

    p.add_argument("--preset", default="qwen2.5-7b", help=f"one of {', '.join(preset_names())} (default %(default)s)")
    p.add_argument("--model", default=None, metavar="PATH",
                   help="a local model folder (or its config.json): size that architecture instead of the "
                        "preset's built-in one; only config.json is read")
    p.add_argument("--gpu", default=None, choices=sorted(HARDWARE),
                   help="hardware profile for memory and speed (default: the preset's)")
    p.add_argument("--gpu-gib", type=positive_float, default=None, help="memory to compare the total with, in GiB")
    p.add_argument("--micro-batch", type=positive_int, default=None,
                   help="sequences per training forward (default: the preset's micro_batch, else the whole update)")
    p.add_argument("--prompts", type=positive_int, default=None, help="prompts per update (default: the preset's)")
    p.add_argument("--max-new-tokens", type=positive_int, default=None, help="answer length budget")
    p.add_argument("--prompt-tokens", type=positive_int, default=None, help="typical prompt length in tokens")
    p.add_argument("--rank", type=positive_int, default=None, help="LoRA rank")
    p.add_argument("--checkpointing", choices=("on", "off"), default=None, help="gradient checkpointing")
    p.add_argument("--engine", choices=("hf", "vllm"), default=None, help="rollout engine")
    p.add_argument("--dry-run", action="store_true",
                   help="first build the model on the meta device, apply LoRA and checkpointing, and check "
                        "shapes (needs the llm extra: transformers and peft; a few seconds)")
    common = CommonFlags(p)
    common.group_size(None, help="G, answers per prompt (default: the preset's)")
    common.json("the estimate")
    common.no_progress(bars=False)


def run(args) -> int:
    from ..lm.estimate import estimate, format_estimate, read_config
    from ..lm.presets import get_preset

    preset = get_preset(args.preset)
    changes = {k: v for k, v in (("prompts", args.prompts), ("group_size", args.group_size),
                                 ("max_new_tokens", args.max_new_tokens), ("prompt_tokens", args.prompt_tokens),
                                 ("lora_rank", args.rank), ("rollout_engine", args.engine)) if v is not None}
    if args.checkpointing is not None:
        changes["gradient_checkpointing"] = args.checkpointing == "on"
    if args.model is not None:
        changes["model"] = args.model
    preset = preset.replace(**changes) if changes else preset
    config = read_config(args.model) if args.model is not None else None
    report = None
    if args.dry_run:
        from ..lm.dry_run import dry_run
        report = dry_run(preset, config, echo=None if args.json else print, show_estimate=False)
        if not args.json:
            print()
    est = estimate(config, preset, hardware=args.gpu, gpu_gib=args.gpu_gib, micro_batch=args.micro_batch)
    if args.json:
        out = est if report is None else {"dry_run": {k: v for k, v in report.items() if k != "estimate"},
                                          "estimate": est}
        print_json(out, indent=1)
    else:
        print(format_estimate(est))
    return 0
