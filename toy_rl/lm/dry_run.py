"""Check a rung-4 configuration without its weights: build the model on the ``meta`` device.

    from toy_rl.lm.dry_run import dry_run
    report = dry_run("qwen2.5-7b")      # ~5-15 s on a laptop CPU, no download, no memory

A meta tensor has a shape and a dtype but no storage, so a 7B model costs
nothing to build. On it, :func:`dry_run`

1. builds the architecture from the config (``AutoModelForCausalLM.from_config``);
2. counts its parameters and compares them with :func:`toy_rl.lm.estimate.param_counts`;
3. checks that every LoRA target is a linear layer in every decoder layer, applies
   LoRA with :func:`toy_rl.lm.lora.add_lora`, and compares the trainable count with
   :func:`toy_rl.lm.estimate.lora_params`;
4. turns gradient checkpointing on (:func:`enable_gradient_checkpointing`) and checks
   that every decoder layer took it;
5. runs a forward and backward pass on a small meta batch -- shapes and dtypes all
   the way to the adapters' gradients, no arithmetic;
6. prints the memory and time estimate.

What it cannot check: anything about values (numerics, the weights' files, the
tokenizer) and anything about memory on a real device -- that is
``bench/gpu_check.py``'s job.
"""
from __future__ import annotations

import os
import time
import warnings

from .estimate import estimate, format_estimate, lora_params, param_counts, read_config
from .presets import SHAPES, get_preset, shape_config

_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def enable_gradient_checkpointing(model) -> int:
    """Turn on activation (gradient) checkpointing in every decoder layer, non-reentrant; returns how
    many layers now checkpoint (ValueError if none: the model does not support it).

    Non-reentrant checkpointing works with a frozen base and LoRA without making the inputs require
    grad. transformers 5 calls it ``activation_checkpointing_enable`` (``gradient_checkpointing_enable``
    is a deprecated alias); older versions only have the latter. Note that checkpointed layers drop
    any KV cache passed to them, so :class:`~toy_rl.lm.policy.HFPolicy` must score with
    ``share_prompts=False`` (see :class:`~toy_rl.lm.presets.Preset`).
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    kwargs = {"use_reentrant": False}
    if hasattr(base, "activation_checkpointing_enable"):
        base.activation_checkpointing_enable(kwargs)
    elif hasattr(base, "gradient_checkpointing_enable"):
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    else:
        raise ValueError(f"{type(base).__name__} has no gradient checkpointing switch")
    n = sum(1 for m in _decoder_layers(base) if getattr(m, "gradient_checkpointing", False) is True)
    if n == 0:
        raise ValueError(f"gradient checkpointing did not turn on in any layer of {type(base).__name__}")
    return n


def _hf_config(model_config, preset):
    if model_config is None:
        return preset.model_config()
    if isinstance(model_config, (str, os.PathLike)) and str(model_config) in SHAPES:
        return shape_config(str(model_config))
    from transformers import AutoConfig
    if isinstance(model_config, (str, os.PathLike)):
        d = read_config(model_config)
    elif isinstance(model_config, dict):
        d = dict(model_config)
    else:
        return model_config                    # already a transformers config
    kind = d.pop("model_type", None)
    if kind is None:
        raise ValueError("the config has no model_type")
    for key in ("architectures", "transformers_version", "_name_or_path", "auto_map", "torch_dtype", "dtype"):
        d.pop(key, None)
    return AutoConfig.for_model(kind, **d)


def _decoder_layers(model):
    from torch import nn
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m) > 0]
    return max(lists, key=len) if lists else []


def _meta_forward(model, vocab: int) -> str:
    """Forward + backward on a (2, 16) meta batch. The causal mask is passed ready-made, as a 4-D
    boolean tensor, because building it from a 2-D mask reads values, which meta tensors lack."""
    import torch
    ids = torch.zeros((2, 16), dtype=torch.long, device="meta")
    mask = torch.ones((2, 1, 16, 16), dtype=torch.bool, device="meta")
    model.train()
    try:
        out = model(input_ids=ids, attention_mask=mask, use_cache=False, logits_to_keep=8)
        loss = out.logits.float().log_softmax(-1).mean()
        loss.backward()
    finally:
        model.eval()
    grads = [p for p in model.parameters() if p.requires_grad]
    reached = sum(p.grad is not None for p in grads)
    shape = tuple(out.logits.shape)
    if shape != (2, 8, vocab):
        raise ValueError(f"meta forward gave logits of shape {shape}, expected (2, 8, {vocab})")
    if reached != len(grads):
        raise ValueError(f"meta backward reached {reached} of {len(grads)} adapter tensors")
    return (f"forward + backward on a (2, 16) batch: logits {shape} {str(out.logits.dtype)[6:]}; "
            f"gradients reach all {reached} adapter tensors")


def dry_run(preset="qwen2.5-7b", model_config=None, forward: bool = True, echo=print, show_estimate: bool = True,
            **changes) -> dict:
    """Validate a preset's configuration on the meta device and print what was checked and the estimate.

    preset:
        a preset name or :class:`~toy_rl.lm.presets.Preset`; ``changes`` edit its fields.
    model_config:
        None (the preset's built-in shape), a transformers config, a dict, or a path to a local model
        folder / its config.json (only that file is read).
    forward:
        also run a forward and backward pass on meta tensors.
    echo:
        called with each line of the report (``print`` by default; None for silence).
    show_estimate:
        end the report with :func:`~toy_rl.lm.estimate.format_estimate`'s table.

    Returns a dict: the counts, what was checked, seconds, and the estimate. Raises ValueError when a
    check fails (a LoRA target missing, counts that disagree, checkpointing that does not turn on).
    """
    import torch
    from transformers import AutoModelForCausalLM

    from .lora import add_lora, count_trainable

    say = echo or (lambda *_: None)
    p = get_preset(preset)
    p = p.replace(**changes) if changes else p
    t0 = time.perf_counter()
    cfg = _hf_config(model_config, p)
    dtype = getattr(torch, _DTYPES[p.dtype])
    say(f"dry run of {p.name!r} on the meta device (shapes only: no weights, no memory)")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    built = time.perf_counter() - t0
    total = sum(t.numel() for t in model.parameters())
    formula = param_counts(cfg)["total"]
    say(f"  built {type(model).__name__} from the config in {built:.1f} s: {total:,} parameters "
        f"(formula: {formula:,}, {'exact' if total == formula else f'off by {total - formula:+,}'})")
    if total != formula:
        raise ValueError(f"parameter count {total:,} != the estimate's formula {formula:,}")

    layers = _decoder_layers(model)
    for i, layer in enumerate(layers):
        names = {n.rsplit(".", 1)[-1] for n, m in layer.named_modules() if isinstance(m, torch.nn.Linear)}
        missing = sorted(set(p.lora_targets) - names)
        if missing:
            raise ValueError(f"LoRA targets {missing} are not linear layers of decoder layer {i}; "
                             f"it has: {sorted(names)}")
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        model = add_lora(model, **p.lora_kwargs())
    adapted = sum(1 for _, m in model.named_modules() if hasattr(m, "lora_A") and len(m.lora_A) > 0)
    trainable = count_trainable(model)
    expected = lora_params(cfg, p.lora_rank, p.lora_targets)
    adapter_dtypes = sorted({str(t.dtype)[6:] for t in model.parameters() if t.requires_grad})
    say(f"  LoRA r{p.lora_rank}/alpha {p.lora_alpha:g} on {', '.join(p.lora_targets)}: {adapted} layers adapted "
        f"({len(layers)} x {len(p.lora_targets)}), {trainable:,} trainable (formula: {expected:,}); adapters "
        f"{'/'.join(adapter_dtypes)}")
    if trainable != expected or adapted != len(layers) * len(p.lora_targets):
        raise ValueError(f"LoRA: {adapted} layers adapted with {trainable:,} parameters; expected "
                         f"{len(layers) * len(p.lora_targets)} with {expected:,}")

    checkpointing = 0
    if p.gradient_checkpointing:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            checkpointing = enable_gradient_checkpointing(model)
        say(f"  gradient checkpointing: on in {checkpointing} of {len(layers)} decoder layers (non-reentrant)")
        if checkpointing != len(layers):
            raise ValueError(f"gradient checkpointing is on in {checkpointing} of {len(layers)} layers")
    else:
        say("  gradient checkpointing: off (as the preset says)")

    forward_report = None
    if forward:
        import transformers
        verbosity = transformers.logging.get_verbosity()
        transformers.logging.set_verbosity_error()       # "use_cache=False with checkpointing": expected
        try:
            forward_report = _meta_forward(model, cfg.get_text_config().vocab_size
                                           if hasattr(cfg, "get_text_config") else cfg.vocab_size)
        finally:
            transformers.logging.set_verbosity(verbosity)
        say("  " + forward_report)
    seconds = time.perf_counter() - t0
    say(f"  all checks passed in {seconds:.1f} s")
    est = estimate(cfg, p)
    if show_estimate:
        say("")
        say(format_estimate(est))
    return {"preset": p.name, "model_class": type(model.get_base_model()).__name__, "params": total,
            "params_formula": formula, "lora_params": trainable, "lora_params_formula": expected,
            "adapted_layers": adapted, "decoder_layers": len(layers), "adapter_dtypes": adapter_dtypes,
            "checkpointed_layers": checkpointing, "forward": forward_report, "seconds": seconds,
            "build_seconds": built, "estimate": est}


__all__ = ["dry_run", "enable_gradient_checkpointing"]
