"""LoRA adapters with peft: the only weights RL changes on rungs 3 and 4.

LoRA adds, beside each chosen linear layer W, a low-rank update
W x + (alpha / rank) * B A x, with A (rank x in) random and B (out x rank) zero at
the start: the adapted model begins exactly equal to the pretrained one, and only
A and B are trained (1.84 M parameters for SmolLM2-135M at rank 16 on q, k, v, o;
4.88 M with the MLP too).
"""
from __future__ import annotations

import warnings
from types import MethodType

import torch
import torch.nn.functional as F

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("gate_proj", "up_proj", "down_proj")
# model_type -> (attention projections, MLP projections); all use the Llama names
FAMILIES = {name: (ATTENTION, MLP) for name in
            ("llama", "qwen2", "qwen3", "mistral", "gemma", "gemma2", "phi3", "olmo", "olmo2")}


def _linear_names(model) -> set[str]:
    return {name.rsplit(".", 1)[-1] for name, mod in model.named_modules() if isinstance(mod, torch.nn.Linear)}


def default_target_modules(model, mlp: bool = False) -> list[str]:
    """The layers LoRA adapts by default for this model family: q, k, v, o (plus gate, up, down
    with ``mlp=True``). Unknown families raise ValueError listing the model's linear layers."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in FAMILIES:
        raise ValueError(f"no default LoRA targets for model_type {model_type!r} (known: {sorted(FAMILIES)}); "
                         f"pass target_modules=[...] from its linear layers: {sorted(_linear_names(model))}")
    attn, ffn = FAMILIES[model_type]
    return list(attn) + (list(ffn) if mlp else [])


def check_lora_args(rank, alpha, dropout) -> None:
    """ValueError for a rank that is not a positive int, alpha <= 0, or dropout outside [0, 1)."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"rank must be an integer >= 1 (typical: 8-64); got {rank!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 0:
        raise ValueError(f"alpha must be a number > 0 (the update is scaled by alpha / rank; typical: "
                         f"2 * rank); got {alpha!r}")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise ValueError(f"dropout must be in [0, 1); got {dropout!r}")


def add_lora(model, rank: int = 16, alpha: float = 32, dropout: float = 0.0, target_modules=None,
             mlp: bool = False):
    """Wrap ``model`` with fresh LoRA adapters (peft) and freeze everything else; returns the PeftModel.

    rank, alpha:
        the adapter's rank r and scale alpha (the update is multiplied by alpha / r).
    dropout:
        LoRA dropout, **0 by default on purpose**. The RL ratio compares the log-prob of a token
        under the policy being trained with the log-prob recorded when it was sampled. Sampling
        runs in eval mode (dropout off) and the loss in train mode (dropout on), so with dropout
        > 0 the two forwards differ even before any update: the ratio is not 1 on-policy, clip
        fractions are not 0, and the clipping rules no longer coincide where they should.
    target_modules:
        names of the linear layers to adapt; None picks the family's default
        (:func:`default_target_modules`: q, k, v, o projections, plus the MLP if ``mlp=True``).
    """
    check_lora_args(rank, alpha, dropout)
    if target_modules is None:
        target_modules = default_target_modules(model, mlp=mlp)
    elif isinstance(target_modules, str) or not all(isinstance(t, str) for t in target_modules) \
            or not list(target_modules):
        raise ValueError(f"target_modules must be a non-empty list of layer names such as "
                         f"['q_proj', 'v_proj']; got {target_modules!r}")
    else:
        target_modules = list(target_modules)
        unknown = sorted(set(target_modules) - _linear_names(model))
        if unknown:
            raise ValueError(f"target_modules {unknown} are not linear layers of this model; "
                             f"its linear layers: {sorted(_linear_names(model))}")
    if hasattr(model, "peft_config"):
        raise ValueError("this model already has LoRA adapters (it is a PeftModel); load a fresh model "
                         "or train the adapters it has")
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as err:
        raise ImportError("LoRA needs peft: pip install 'toy_rl[llm]'") from err
    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=float(dropout),
                        target_modules=target_modules, bias="none", task_type="CAUSAL_LM")
    # peft keeps the adapters in float32 even on a bf16 model: good, Adam's small steps would
    # round away in bf16 (8 bits of mantissa)
    with warnings.catch_warnings():         # peft 0.21 calls a transformers 5 deprecated property
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        peft_model = get_peft_model(model, config)
    peft_model.eval()
    return peft_model


def cast_base(model, dtype) -> None:
    """Cast the frozen (base) weights to ``dtype``; the trainable ones (the adapters) are kept in float32,
    where AdamW's small steps do not round away. Buffers (rotary frequencies) keep their dtype."""
    for p in model.parameters():
        if not p.dtype.is_floating_point:
            continue
        want = torch.float32 if p.requires_grad else dtype
        if p.dtype != want:
            p.data = p.data.to(want)


def low_precision_products(model, on: bool = True) -> None:
    """Let every LoRA layer of ``model`` multiply in its input's dtype (``on``), or in float32 as peft does (off).

    peft casts a bf16 layer's input to the adapters' float32, runs x A^T B^T there and casts the sum back: two
    copies of the input and one of the output per layer, and float32 products on a CPU whose bf16 ones are twice
    as fast. On, a layer computes ``W x + x A^T (s B)^T`` with A and s B rounded to the input's dtype (the
    adapters themselves, their gradients and AdamW's state stay float32: the rounding is inside the graph, so the
    gradient reaches the float32 adapters). The same sum, rounded to bf16 twice rather than once. Layers peft
    would treat otherwise (merged, disabled, several adapters, DoRA, dropout, a float32 input) keep peft's
    forward."""
    for mod in model.modules():
        if hasattr(mod, "lora_A") and isinstance(getattr(mod, "base_layer", None), torch.nn.Linear):
            if on:
                mod.forward = MethodType(_forward_in_input_dtype, mod)
            else:
                mod.__dict__.pop("forward", None)


def uses_low_precision_products(model) -> bool:
    """Whether :func:`low_precision_products` is on in ``model`` (a run records it: it rounds apart from peft)."""
    return any("forward" in mod.__dict__ for mod in model.modules() if hasattr(mod, "lora_A"))


def _forward_in_input_dtype(self, x, *args, **kwargs):
    names = [a for a in self.active_adapters if a in self.lora_A.keys()]
    if (args or kwargs or x.dtype == torch.float32 or self.disable_adapters or self.merged or len(names) != 1
            or self.lora_variant.get(names[0]) is not None
            or not isinstance(self.lora_dropout[names[0]], torch.nn.Identity)):
        return type(self).forward(self, x, *args, **kwargs)
    a, b, scale = self.lora_A[names[0]].weight, self.lora_B[names[0]].weight, self.scaling[names[0]]
    return self.base_layer(x) + F.linear(F.linear(x, a.to(x.dtype)), (b * scale).to(x.dtype))


def count_trainable(model) -> int:
    """Number of parameters the optimizer will update."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
