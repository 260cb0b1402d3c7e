"""How much memory and time a LoRA RL run needs, from the model's config alone (no weights).

    from toy_rl.lm.estimate import estimate, format_estimate
    print(format_estimate(estimate(None, "qwen2.5-7b")))          # the preset's built-in shape
    print(format_estimate(estimate("path/to/model", "qwen2.5-7b", hardware="h100")))

``estimate(model_config, preset_or_settings)`` returns a JSON-ready dict; every
number below is computed from the config's shape: H hidden size, I MLP width,
L layers, n_h query heads, n_kv key-value heads, d head size, V vocabulary, and
the run's settings: B sequences per training forward (the micro-batch, RLConfig's
``micro_batch``; without one the loop scores the whole update, prompts x group_size),
P prompt tokens, N answer tokens, r LoRA rank, ``a`` bytes per activation
(2 for bf16, 4 for float32).

Parameters (exact for the Llama-style families: llama, mistral, qwen2, qwen3;
checked against models instantiated from configs in tests/test_lm_estimate.py):
embeddings V·H; per layer q, k, v, o projections H·n_h·d + 2·H·n_kv·d + n_h·d·H
(+ their biases: Qwen2 has biases on q, k, v), MLP 3·H·I, two RMSNorms 2·H
(Qwen3 adds q/k norms, 2·d); a final norm H; the LM head V·H unless tied to the
embeddings.

Memory, in bytes:

* weights: parameters x bytes of the dtype.
* LoRA: r·(in + out) per adapted linear layer and layer; peft keeps adapters in
  float32, and AdamW adds two float32 moments and the gradient: 16 bytes each.
* activations saved for the backward pass, per token and layer (measured with
  ``torch.autograd.graph.saved_tensors_hooks`` on small models with peft LoRA and
  a frozen base; the test re-measures it)::

      2·(4H + 4)                two RMSNorms: transformers upcasts to float32 and keeps
                                the input and 1/rms
      a·2·n_h·d + a·2·n_kv·d    SDPA / flash attention keeps q, k, v and its output
      + 4·n_h                   ... and the log-sum-exp per head (no T x T matrix)
      3·a·I                     MLP: gate, up and SiLU(gate)
      Σ 4·(in + r)              peft casts each adapted layer's input to float32 for its
                                adapters (q, k and v each make their own copy) and keeps
                                the rank-r intermediate. In a float32 model the cast is a
                                no-op: layers that share an input share it, and o_proj's
                                input is the attention output already counted.

  A frozen base layer keeps nothing of its own. With gradient checkpointing a
  layer keeps only its input (a·H per token) and recomputes the rest in the
  backward pass. On top of what is kept, the backward pass holds about one layer's
  activations as gradients in flight (and, when checkpointing, the recomputed layer
  too). Tokens per forward: B·(P + N); with shared prompts (HFPolicy's
  ``share_prompts``) the G answers to one prompt reuse its forward: B·P/G + B·N
  tokens, plus the copied prompt K/V that the answers' attention keeps.
* logits: the LM head's output for the answer positions, B·N·V values: the worst case, every answer at its
  budget (with ``head_on_answers``, HFPolicy's default for Llama, Qwen and Mistral, the head runs on real answer
  tokens only, so shorter answers take less). HFPolicy's
  ``score`` upcasts them to float32 and computes the log-probs and the entropy:
  16 bytes per value at the peak (4 float32 copies while the entropy is summed;
  measured before :mod:`toy_rl.lm.logprob` kept only the logits and their softmax, an upper bound now), 4 kept for
  the backward pass (the logits in the head's dtype: 4 in float32, 2 in bf16, counted as 4). **With a 152k
  vocabulary this is the largest term**: one float32 copy for 64 answers of 512 tokens is 18.6 GiB.
* KV cache while sampling: 2 (K and V) · L · n_kv · d · a bytes per token, for
  B_rollout = prompts·G rows of P + N tokens.

Training peak = weights + LoRA state + the larger of (activations kept + logits
at their peak) and (activations at the backward peak + logits kept), plus, on the CPU
with micro-batches, the other micro-batches' activations and kept logits: toy-rl's
CPU runs hold their graphs from BAPO's search pass to the backward
(``HFPolicy.hold_graphs``; on a GPU a no-grad pass scores them first instead). Rollout peak
= weights + LoRA state + KV cache + the sampling step's logits. The total is the
larger of the two, plus an assumed CUDA context and allocator slack.

Time (rough; bench/gpu_check.py measures the real thing):

* FLOPs: a forward costs 2·N per token, N the matmul weights of the layers (the
  LM head only where logits are taken), plus attention, 4·ctx·n_h·d per token and
  layer (ctx: the tokens attended to, on average half the sequence when training).
  Generation: 2·N per token. Training with LoRA: 4·N per token -- the forward (2·N)
  and the backward's input gradients (2·N); a frozen base needs no weight
  gradients, the other 2·N of the usual 6·N·tokens, and the adapters' own
  gradients are < 1 % -- and 6·N with gradient checkpointing (the forward runs
  twice). The LM head is not recomputed: 4·V·H per answer token either way.
* Seconds: training FLOPs / (peak x ``train_efficiency``), the peak of the run's dtype (a preset's
  "auto" is the profile's faster one). The CPU profile's peaks are measured, not a datasheet's:
  a 2048 x 576 @ 576 x 1536 matmul (SmolLM2-135M's MLP) ran at 0.16 TFLOP/s in float32 and
  1.06 in bfloat16 on a 2-core Intel Xeon with AMX-BF16, one of the machines rung 3 was developed
  on (``python bench/bench_bf16.py``, bench/README.md). Its efficiencies were calibrated on float32
  runs, and whole-model bf16 gains were smaller than the matmul's 6.6x there (forward 3.1x), so a
  bf16 CPU estimate is optimistic. A 2-core AMD EPYC with AVX512-BF16 and no AMX measured 0.10
  and 0.21 TFLOP/s, and one rung-3 update there was 1.3x faster in bf16 (bench/bench_lm_update.py; from the
  search-hard-warm warm start, a reuse-2 run's mean update 1.35-1.45x: 34.5-34.9 s against 47-50 s). A decode
  step is the slowest of its FLOPs, reading every weight and the KV cache from memory
  (bandwidth x ``bandwidth_efficiency``), and HF's per-step overhead (Python and
  kernel launches, ``hf_step_ms_per_layer`` x L; none for vLLM, which replays CUDA
  graphs). The efficiencies are assumptions, stated in :data:`HARDWARE`.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from .presets import SHAPES, Preset, get_preset

GIB = 2 ** 30
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
FAMILIES = ("llama", "mistral", "qwen2", "qwen3")
LOGIT_PEAK_BYTES = 16            # per logit value at the peak of HFPolicy.score (4 float32 copies, measured)
LOGIT_KEPT_BYTES = 4             # the logits kept for backward, in the head's dtype (toy_rl.lm.logprob): 4 in
                                 # float32, 2 in bf16; 4 here, an upper bound for bf16
CUDA_CONTEXT_GIB = 1.0           # CUDA context, cuBLAS workspaces: not in max_memory_allocated, but on the card
ALLOCATOR_SLACK = 0.05           # fragmentation of PyTorch's caching allocator (a fraction of the peak)


@dataclass(frozen=True)
class Hardware:
    """What the time estimate assumes about a machine (peaks from vendor datasheets, dense math)."""
    name: str
    memory_gib: float | None              # None: read the machine's RAM (CPU)
    peak_tflops: dict                     # dtype -> dense matmul TFLOP/s
    bandwidth_gb_s: float                 # memory bandwidth, GB/s
    train_efficiency: float               # fraction of peak a training forward/backward reaches
    decode_efficiency: float              # fraction of peak for decode matmuls (few rows)
    bandwidth_efficiency: float           # fraction of bandwidth a decode step reaches
    hf_step_ms_per_layer: float           # HF sampling loop: Python + kernel-launch time per layer and step
    source: str


HARDWARE = {
    "h200": Hardware(
        "NVIDIA H200 SXM", 140.4, {"bfloat16": 989.0, "float16": 989.0, "float32": 67.0}, 4800.0,
        0.35, 0.5, 0.7, 1.0,
        "datasheet: 989 TFLOP/s dense BF16, 67 FP32 (no TF32), 4.8 TB/s, 141 GB (nvidia-smi: ~143,771 MiB). "
        "Efficiencies and the HF per-step overhead are assumptions for eager PyTorch with peft, "
        "not measurements: replace them with bench/gpu_check.py's numbers"),
    "h100": Hardware(
        "NVIDIA H100 SXM 80GB", 79.6, {"bfloat16": 989.0, "float16": 989.0, "float32": 67.0}, 3350.0,
        0.35, 0.5, 0.7, 1.0,
        "datasheet: 989 TFLOP/s dense BF16, 3.35 TB/s, 80 GB (nvidia-smi: ~81,559 MiB); efficiencies assumed"),
    "a100-80gb": Hardware(
        "NVIDIA A100 80GB SXM", 79.3, {"bfloat16": 312.0, "float16": 312.0, "float32": 19.5}, 2039.0,
        0.35, 0.5, 0.7, 1.0,
        "datasheet: 312 TFLOP/s dense BF16, 2.0 TB/s, 80 GB; efficiencies assumed"),
    "cpu": Hardware(
        "2-core x86 CPU with AVX512-BF16", None, {"float32": 0.16, "bfloat16": 1.06, "float16": 0.02}, 20.0,
        0.7, 0.15, 0.5, 2.0,
        "peaks measured on a 2-core Intel Xeon with AMX-BF16 (bench/bench_bf16.py: a matmul of SmolLM2's MLP "
        "shape, 0.16 TFLOP/s float32, 1.06 bfloat16); efficiencies calibrated to rung 3's float32 "
        "runs there (docs/smollm2.md: one update over 64 sequences ~2.9 s, a rollout of 8 x 8 answers of <= 8 "
        "tokens ~5 s); other CPUs differ a lot"),
}


# ---------------------------------------------------------------------------------------------- shape
@dataclass(frozen=True)
class Shape:
    """The numbers of a config that the estimate needs."""
    model_type: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool
    max_positions: int | None

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def linears(self) -> dict:
        """(in, out) of each linear layer in a decoder layer, by the name peft targets."""
        H, I = self.hidden, self.intermediate
        return {"q_proj": (H, self.q_dim), "k_proj": (H, self.kv_dim), "v_proj": (H, self.kv_dim),
                "o_proj": (self.q_dim, H), "gate_proj": (H, I), "up_proj": (H, I), "down_proj": (I, H)}


def read_config(path) -> dict:
    """The ``config.json`` of a local model folder (or the file itself) as a dict; nothing else is read."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise ValueError(f"no config.json at {p}: pass a model folder written by save_pretrained "
                         "or the path of its config.json")
    try:
        return json.loads(p.read_text())
    except ValueError as err:
        raise ValueError(f"{p} is not valid JSON: {err}") from None


def _as_dict(model_config) -> dict:
    if isinstance(model_config, dict):
        d = dict(model_config)
    elif isinstance(model_config, (str, os.PathLike)):
        if str(model_config) in SHAPES:
            d = dict(SHAPES[str(model_config)])
        else:
            d = read_config(model_config)
    elif hasattr(model_config, "to_dict"):            # a transformers PretrainedConfig
        text = model_config.get_text_config() if hasattr(model_config, "get_text_config") else model_config
        d = text.to_dict()
        d.setdefault("model_type", getattr(text, "model_type", None))
    else:
        raise ValueError(f"model_config must be a transformers config, a dict, a built-in shape name "
                         f"({sorted(SHAPES)}) or a path to a config.json; got {type(model_config).__name__}")
    if isinstance(d.get("text_config"), dict):         # multimodal wrapper: the language model's part
        d = {**d["text_config"], "model_type": d["text_config"].get("model_type", d.get("model_type"))}
    return d


def shape_of(model_config) -> Shape:
    """Read the numbers the estimate needs from a config (object, dict, shape name or path)."""
    d = _as_dict(model_config)
    kind = d.get("model_type")
    if kind not in FAMILIES:
        raise ValueError(f"the estimate covers Llama-style models ({', '.join(FAMILIES)}); this config says "
                         f"model_type={kind!r}. toy_rl.lm.dry_run counts any model's parameters on the "
                         "meta device")
    missing = [k for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                           "vocab_size") if not isinstance(d.get(k), int)]
    if missing:
        raise ValueError(f"config lacks {missing}")
    H, heads = d["hidden_size"], d["num_attention_heads"]
    head_dim = d.get("head_dim") or H // heads
    attention_bias = bool(d.get("attention_bias", False))
    return Shape(
        model_type=kind, hidden=H, intermediate=d["intermediate_size"], layers=d["num_hidden_layers"],
        heads=heads, kv_heads=d.get("num_key_value_heads") or heads, head_dim=head_dim,
        vocab=d["vocab_size"], tied=bool(d.get("tie_word_embeddings", False)),   # transformers default
        qkv_bias=True if kind == "qwen2" else attention_bias,
        o_bias=False if kind == "qwen2" else attention_bias,
        mlp_bias=bool(d.get("mlp_bias", False)) if kind == "llama" else False,
        qk_norm=kind == "qwen3", max_positions=d.get("max_position_embeddings"))


# ---------------------------------------------------------------------------------------------- counts
def param_counts(model_config) -> dict:
    """Parameters by part: embeddings, attention (incl. biases, GQA), mlp, norms, lm_head, total.
    ``total`` counts tied embeddings once (as ``model.num_parameters()`` does)."""
    s = model_config if isinstance(model_config, Shape) else shape_of(model_config)
    H, I, L = s.hidden, s.intermediate, s.layers
    attn = H * s.q_dim + 2 * H * s.kv_dim + s.q_dim * H
    attn += (s.q_dim + 2 * s.kv_dim) * s.qkv_bias + H * s.o_bias
    mlp = 3 * H * I + (2 * I + H) * s.mlp_bias
    norms = 2 * H + 2 * s.head_dim * s.qk_norm
    counts = {"embeddings": s.vocab * H, "attention": L * attn, "mlp": L * mlp, "norms": L * norms + H,
              "lm_head": 0 if s.tied else s.vocab * H}
    counts["per_layer"] = attn + mlp + norms
    counts["total"] = sum(counts[k] for k in ("embeddings", "attention", "mlp", "norms", "lm_head"))
    counts["matmul_per_token"] = L * (H * s.q_dim + 2 * H * s.kv_dim + s.q_dim * H + 3 * H * I)
    return counts


def lora_params(model_config, rank: int, targets) -> int:
    """Trainable LoRA parameters: r·(in + out) per adapted linear layer, in every decoder layer."""
    s = model_config if isinstance(model_config, Shape) else shape_of(model_config)
    shapes = s.linears()
    unknown = sorted(set(targets) - set(shapes))
    if unknown:
        raise ValueError(f"LoRA targets {unknown} are not linear layers of a {s.model_type} decoder layer; "
                         f"known: {list(shapes)}")
    return s.layers * sum(rank * (shapes[t][0] + shapes[t][1]) for t in targets)


def layer_activation_bytes(model_config, dtype: str, rank: int, targets) -> int:
    """Bytes a LoRA-adapted decoder layer keeps for the backward pass, per token (see the module doc)."""
    s = model_config if isinstance(model_config, Shape) else shape_of(model_config)
    a = _bytes(dtype)
    H, I = s.hidden, s.intermediate
    b = 2 * (4 * H + 4)                                         # two RMSNorms, float32 input + 1/rms
    if s.qk_norm:                                               # Qwen3: RMSNorm on q and k per head
        b += 4 * (s.q_dim + s.kv_dim) + 4 * (s.heads + s.kv_heads)
    b += a * 2 * s.q_dim + a * 2 * s.kv_dim + 4 * s.heads      # SDPA: q, out, k, v, log-sum-exp
    b += 3 * a * I                                              # gate, up, SiLU(gate)
    shapes = s.linears()
    b += 4 * rank * len(targets)                                # LoRA: A x, float32
    if a == 4:                    # float32: no cast; one saved input per distinct input, and o_proj's input
        groups = [("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"), ("down_proj",)]   # is SDPA's output
        b += sum(4 * shapes[g[0]][0] for g in groups if set(g) & set(targets))
    else:                                                       # bf16: each adapted layer casts its own copy
        b += sum(4 * shapes[t][0] for t in targets)
    return b


def _bytes(dtype: str) -> int:
    if dtype not in BYTES:
        raise ValueError(f"dtype must be one of {sorted(BYTES)}; got {dtype!r}")
    return BYTES[dtype]


# ---------------------------------------------------------------------------------------------- settings
def _settings(preset_or_settings, changes) -> Preset:
    if isinstance(preset_or_settings, dict):
        base = get_preset(preset_or_settings.get("preset", "qwen2.5-7b"))
        fields = {k: v for k, v in preset_or_settings.items() if k != "preset"}
        preset = base.replace(**fields)
    else:
        preset = get_preset(preset_or_settings)
    return preset.replace(**changes) if changes else preset


def _hardware(name) -> Hardware:
    if isinstance(name, Hardware):
        return name
    if name not in HARDWARE:
        raise ValueError(f"unknown hardware {name!r}; known: {', '.join(HARDWARE)}")
    return HARDWARE[name]


def _ram_gib() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB
    except (ValueError, OSError, AttributeError):
        return None


# ---------------------------------------------------------------------------------------------- estimate
def estimate(model_config=None, preset_or_settings="qwen2.5-7b", hardware=None, gpu_gib=None,
             micro_batch=None, **changes) -> dict:
    """Memory (bytes) and time (seconds) of one RL update, from a config and a preset.

    model_config:
        a transformers config, a dict in config.json terms, a path to a model folder or its
        config.json (only that file is read), a :data:`~toy_rl.lm.presets.SHAPES` name, or None
        for the preset's built-in shape.
    preset_or_settings:
        a preset name, a :class:`~toy_rl.lm.presets.Preset`, or a dict of preset fields (applied to
        the preset named by its ``"preset"`` key, default ``"qwen2.5-7b"``).
    hardware:
        a key of :data:`HARDWARE` (default: the preset's). ``gpu_gib`` overrides its memory.
    micro_batch:
        sequences per training forward (:class:`~toy_rl.rl.loop.RLConfig`'s ``micro_batch``).
        Default: the preset's (``qwen2.5-7b``: one group of 8), or the whole update
        (prompts x group_size) when the preset has none.
    changes:
        preset fields to change, e.g. ``max_new_tokens=1024``.
    """
    preset = _settings(preset_or_settings, changes)
    if model_config is None:
        if preset.shape is None:
            raise ValueError(f"preset {preset.name!r} has no built-in shape: pass model_config")
        model_config = preset.shape
    s = shape_of(model_config)
    hw = _hardware(hardware or preset.hardware)
    if preset.dtype == "auto":                               # the profile's faster dtype
        fast = hw.peak_tflops.get("bfloat16", 0) > hw.peak_tflops["float32"]
        preset = preset.replace(dtype="bfloat16" if fast else "float32")
    a = _bytes(preset.dtype)
    G = preset.group_size
    rows = preset.prompts * G
    if micro_batch is None:
        micro_batch = preset.micro_batch
    B = rows if micro_batch is None else micro_batch
    if isinstance(B, bool) or not isinstance(B, int) or B < 1:
        raise ValueError(f"micro_batch must be an integer >= 1; got {micro_batch!r}")
    P, N = preset.prompt_tokens, preset.max_new_tokens
    if s.max_positions and P + N > s.max_positions:
        raise ValueError(f"prompt_tokens + max_new_tokens = {P + N} exceeds the model's context of "
                         f"{s.max_positions} tokens")
    targets = preset.lora_targets
    params = param_counts(s)
    n_lora = lora_params(s, preset.lora_rank, targets)
    L, H, V = s.layers, s.hidden, s.vocab

    # --- memory --------------------------------------------------------------------------------------
    weights = params["total"] * a
    lora_state = n_lora * (4 + 4 + 8)                        # fp32 params, grads, AdamW m and v
    per_layer = layer_activation_bytes(s, preset.dtype, preset.lora_rank, targets)
    final = 4 * H + 4                                        # the final RMSNorm
    share = preset.share_prompts and not preset.gradient_checkpointing
    if share:
        tokens = math.ceil(B / G) * P + B * N
        prompt_kv = L * B * P * 2 * a * s.kv_dim            # the copied prompt K/V the answers attend to
    else:
        tokens, prompt_kv = B * (P + N), 0
    act_full_kept = tokens * (L * per_layer + final) + prompt_kv
    act_full_peak = act_full_kept + tokens * per_layer
    act_ckpt_kept = tokens * (L * a * H + final) + prompt_kv
    act_ckpt_peak = act_ckpt_kept + 2 * tokens * per_layer
    act_kept, act_peak = ((act_ckpt_kept, act_ckpt_peak) if preset.gradient_checkpointing
                          else (act_full_kept, act_full_peak))
    logit_values = B * N * V
    logits_peak, logits_kept = logit_values * LOGIT_PEAK_BYTES, logit_values * LOGIT_KEPT_BYTES
    on_gpu = hw.memory_gib is not None
    # toy-rl's CPU runs hold every micro-batch's graph from BAPO's search pass to its backward (HFPolicy.hold_graphs)
    hold = not on_gpu and B < rows
    held = (math.ceil(rows / B) - 1) * (act_kept + logits_kept) if hold else 0
    train_peak = weights + lora_state + max(act_kept + logits_peak, act_peak + logits_kept) + held

    sample_rows = min(rows, 256)                             # HFPolicy samples at most max_batch=256 rows at once
    kv_cache = 2 * L * s.kv_dim * a * sample_rows * (P + N)
    sampling_work = sample_rows * V * 4 * 3                  # float32 logits, log-softmax, probabilities
    vllm_weights = weights if preset.rollout_engine == "vllm" else 0
    rollout_peak = weights + lora_state + kv_cache + sampling_work + vllm_weights
    body = max(train_peak, rollout_peak)
    overhead = (CUDA_CONTEXT_GIB * GIB + ALLOCATOR_SLACK * body) if on_gpu else 0
    total = body + overhead
    capacity_gib = gpu_gib if gpu_gib is not None else (hw.memory_gib if on_gpu else _ram_gib())
    if capacity_gib is not None and not capacity_gib > 0:
        raise ValueError(f"gpu_gib must be > 0; got {gpu_gib!r}")

    # --- time ----------------------------------------------------------------------------------------
    peak = hw.peak_tflops.get(preset.dtype, hw.peak_tflops["float32"]) * 1e12
    mm = params["matmul_per_token"]
    head = V * H
    attn = lambda ctx: 4 * ctx * s.q_dim * L                 # QK^T and AV, per token
    distinct = preset.prompts
    prefill_flops = distinct * P * (2 * mm + attn(P / 2)) + distinct * 2 * head
    decode_ctx = P + N / 2
    step_flops = sample_rows * (2 * mm + 2 * head + attn(decode_ctx))
    step_bytes = params["matmul_per_token"] * a + head * a + 2 * L * s.kv_dim * a * sample_rows * decode_ctx
    overhead_s = L * hw.hf_step_ms_per_layer / 1e3 if preset.rollout_engine == "hf" else 0.0
    step_s = max(step_flops / (peak * hw.decode_efficiency),
                 step_bytes / (hw.bandwidth_gb_s * 1e9 * hw.bandwidth_efficiency), overhead_s)
    batches = math.ceil(rows / 256)
    rollout_s = prefill_flops / (peak * hw.train_efficiency) + batches * N * step_s
    fwd = tokens * (2 * mm + attn((P + N) / 2))
    train_flops = fwd * (3 if preset.gradient_checkpointing else 2) + 4 * head * B * N
    if B < rows and not hold:                                # a no-grad pass first: BAPO's search sees it all
        train_flops += fwd
    train_flops *= rows / B                                  # every micro-batch of the update
    train_s = train_flops / (peak * hw.train_efficiency)
    bound = ("overhead" if step_s == overhead_s else
             "compute" if step_s == step_flops / (peak * hw.decode_efficiency) else "bandwidth")

    advice = []
    if logits_peak > 0.5 * train_peak and B > G:
        small = estimate(s_dict(s), preset, hw, gpu_gib, micro_batch=G)
        advice.append(f"logits are {logits_peak / train_peak:.0%} of the training peak: scoring in micro-batches "
                      f"of {G} sequences would bring the total to {small['memory']['total'] / GIB:.1f} GiB "
                      f"(micro_batch={G})")
    if not preset.gradient_checkpointing and act_full_peak > 4 * act_ckpt_peak and on_gpu:
        advice.append(f"gradient checkpointing would cut activations from {act_full_peak / GIB:.1f} to "
                      f"{act_ckpt_peak / GIB:.1f} GiB for ~1/3 more training compute")
    fits = None if capacity_gib is None else total <= capacity_gib * GIB
    return {
        "preset": preset.name, "settings": preset.to_dict(), "shape": asdict(s),
        "hardware": {**asdict(hw), "key": next((k for k, v in HARDWARE.items() if v == hw), None),
                     "capacity_gib": capacity_gib},
        "batch": {"rows": rows, "micro_batch": B, "prompt_tokens": P, "answer_tokens": N,
                  "train_tokens_per_forward": tokens, "shared_prompts": share, "sample_rows": sample_rows},
        "params": params, "lora_params": n_lora, "lora_fraction": n_lora / params["total"],
        "memory": {"weights": weights, "lora_state": lora_state, "activations": act_peak,
                   "activations_kept": act_kept, "activations_no_ckpt": act_full_peak,
                   "activations_ckpt": act_ckpt_peak, "activation_bytes_per_token_layer": per_layer,
                   "logits": logits_peak, "logits_kept": logits_kept, "logits_one_fp32_copy": logit_values * 4,
                   "held_graphs": held,
                   "kv_cache": kv_cache, "sampling": sampling_work, "vllm_weights": vllm_weights,
                   "train_peak": train_peak, "rollout_peak": rollout_peak, "overhead": overhead, "total": total},
        "fits": fits,
        "flops": {"rollout": prefill_flops + batches * N * step_flops, "train": train_flops},
        "seconds": {"rollout": rollout_s, "train": train_s, "update": rollout_s + train_s,
                    "decode_step": step_s, "decode_bound": bound},
        "advice": advice,
    }


def s_dict(s: Shape) -> dict:
    """A Shape back to config.json terms (round trip through :func:`shape_of`)."""
    return {"model_type": s.model_type, "hidden_size": s.hidden, "intermediate_size": s.intermediate,
            "num_hidden_layers": s.layers, "num_attention_heads": s.heads, "num_key_value_heads": s.kv_heads,
            "head_dim": s.head_dim, "vocab_size": s.vocab, "tie_word_embeddings": s.tied,
            "attention_bias": s.qkv_bias and s.model_type != "qwen2", "mlp_bias": s.mlp_bias,
            "max_position_embeddings": s.max_positions}


# ---------------------------------------------------------------------------------------------- table
def _gib(x) -> str:
    return f"{x / GIB:8.2f}"


def _count(n) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}"


def format_estimate(d: dict) -> str:
    """A readable table of :func:`estimate`'s result: GiB per part and the total against the memory."""
    st, sh, b, m, p, hw = d["settings"], d["shape"], d["batch"], d["memory"], d["params"], d["hardware"]
    a = BYTES[st["dtype"]]
    ckpt = st["gradient_checkpointing"]
    micro = ("" if b["micro_batch"] >= b["rows"] else
             " (micro-batches: gradient accumulation; BAPO's search pass holds every one's graph)" if m["held_graphs"]
             else f" (micro-batches: gradient accumulation, after one no-grad pass over all {b['rows']})")
    lines = [
        f"{d['preset']}: {sh['model_type']} model, {_count(p['total'])} parameters "
        f"({sh['layers']} layers, hidden {sh['hidden']}, MLP {sh['intermediate']}, {sh['heads']} heads / "
        f"{sh['kv_heads']} KV heads of {sh['head_dim']}, vocabulary {sh['vocab']:,})",
        f"LoRA r{st['lora_rank']}/alpha {st['lora_alpha']:g} on {', '.join(st['lora_targets'])}: "
        f"{_count(d['lora_params'])} trainable ({d['lora_fraction']:.2%})",
        f"batch: {st['prompts']} prompts x {st['group_size']} answers, prompt ~{b['prompt_tokens']} + answer "
        f"{b['answer_tokens']} tokens; {b['micro_batch']} sequences per training forward"
        f"{micro}; {st['dtype']}; "
        f"gradient checkpointing {'on' if ckpt else 'off'}; rollouts: {st['rollout_engine']}",
        "",
        f"{'memory':44s}{'GiB':>8s}   how",
        f"  {'weights (' + st['dtype'] + ')':42s}{_gib(m['weights'])}   {p['total']:,} params x {a} bytes",
        f"  {'LoRA adapters + grads + AdamW (float32)':42s}{_gib(m['lora_state'])}   "
        f"{d['lora_params']:,} x (4 + 4 + 8) bytes",
        f"  {'activations, ' + ('checkpointed' if ckpt else 'all kept'):42s}{_gib(m['activations'])}   "
        f"{b['train_tokens_per_forward']:,} tokens x {sh['layers']} layers; "
        f"{m['activation_bytes_per_token_layer']:,} bytes/token/layer unless checkpointed",
        f"  {'  (the other choice: ' + ('no checkpointing' if ckpt else 'checkpointing') + ')':42s}"
        f"{_gib(m['activations_no_ckpt'] if ckpt else m['activations_ckpt'])}",
        f"  {'logits in score (float32, peak)':42s}{_gib(m['logits'])}   {b['micro_batch']} x "
        f"{b['answer_tokens']} x {sh['vocab']:,} x 16 bytes (4 float32 copies; one is "
        f"{m['logits_one_fp32_copy'] / GIB:.2f} GiB)",
        *([f"  {'the other micro-batches, held (BAPO, CPU)':42s}{_gib(m['held_graphs'])}   their activations and "
           "logits kept for the backward (HFPolicy.hold_graphs)"] if m["held_graphs"] else []),
        f"  {'= training peak':42s}{_gib(m['train_peak'])}",
        f"  {'KV cache while sampling':42s}{_gib(m['kv_cache'])}   2 x {sh['layers']} layers x {sh['kv_heads']} "
        f"x {sh['head_dim']} x {a} bytes x {b['sample_rows']} rows x {b['prompt_tokens'] + b['answer_tokens']} "
        "tokens",
    ]
    if m["vllm_weights"]:
        lines.append(f"  {'vLLM copy of the weights':42s}{_gib(m['vllm_weights'])}   "
                     "plus whatever KV pool gpu_memory_utilization reserves")
    lines += [f"  {'= rollout peak':42s}{_gib(m['rollout_peak'])}   weights + LoRA state + KV cache + sampling"]
    if m["overhead"]:
        lines.append(f"  {'CUDA context + allocator slack (assumed)':42s}{_gib(m['overhead'])}   "
                     f"{CUDA_CONTEXT_GIB:g} GiB + {ALLOCATOR_SLACK:.0%}")
    cap = hw["capacity_gib"]
    verdict = ("" if cap is None else
               f"   of {cap:.1f} GiB ({hw['name']}): {'fits' if d['fits'] else 'DOES NOT FIT'}"
               f" ({m['total'] / GIB / cap:.0%})")
    lines.append(f"  {'total (max of training, rollout)':42s}{_gib(m['total'])}{verdict}")
    sec = d["seconds"]
    lines += [
        "",
        f"time per update (rough, {hw['name']}; assumptions in toy_rl.lm.estimate.HARDWARE)",
        f"  rollout   {sec['rollout']:8.1f} s   {b['answer_tokens']} decode steps x {sec['decode_step'] * 1e3:.1f} ms "
        f"({sec['decode_bound']}-bound) + prefill; {d['flops']['rollout'] / 1e12:.1f} TFLOP",
        f"  training  {sec['train']:8.1f} s   {d['flops']['train'] / 1e12:.1f} TFLOP at "
        f"{hw['train_efficiency']:.0%} of {hw['peak_tflops'].get(st['dtype'], 0):g} TFLOP/s "
        f"({'6' if ckpt else '4'} x params x tokens: LoRA needs no base weight gradients)",
        f"  update    {sec['update']:8.1f} s   ({sec['update'] * 100 / 3600:.1f} h per 100 updates)",
    ]
    if d["advice"]:
        lines += [""] + [f"note: {x}" for x in d["advice"]]
    return "\n".join(lines)


__all__ = ["BYTES", "HARDWARE", "Hardware", "Shape", "estimate", "format_estimate", "layer_activation_bytes",
           "lora_params", "param_counts", "read_config", "shape_of"]
