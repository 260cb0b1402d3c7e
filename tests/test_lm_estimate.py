"""Rung 4 sizing: presets, parameter counts (exact, against models built from configs), LoRA counts,
the activation formula (against the tensors autograd actually saves), the estimate and `toy-rl estimate`."""
import json
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from toy_rl.cli import main  # noqa: E402
from toy_rl.lm.estimate import (GIB, LOGIT_KEPT_BYTES, estimate, format_estimate, layer_activation_bytes,  # noqa: E402
                                lora_params, param_counts, read_config, shape_of)
from toy_rl.lm.presets import ATTENTION, MLP, PRESETS, SHAPES, get_preset  # noqa: E402

QWEN7B = 7_615_616_512          # Qwen2.5-7B-Instruct: "7.61 B" on its model card (7.62 B rounded up)
TINY = dict(vocab_size=50, hidden_size=48, intermediate_size=112, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=64)


def _tiny(family, **extra):
    return dict(model_type=family, num_hidden_layers=2, **TINY, **extra)


# ------------------------------------------------------------------------------------------------ presets
def test_presets_and_errors():
    assert set(PRESETS) == {"smollm2-135m", "qwen2.5-7b"}
    small, big = get_preset("smollm2-135m"), get_preset("QWEN2.5-7B")
    assert (small.dtype, small.lora_targets, small.gradient_checkpointing) == ("float32", ATTENTION, False)
    assert (big.dtype, big.lora_targets, big.gradient_checkpointing, big.share_prompts) == \
        ("bfloat16", ATTENTION + MLP, True, False)
    assert (big.prompts, big.group_size, big.max_new_tokens, big.rollout_engine) == (8, 8, 512, "hf")
    with pytest.raises(ValueError, match="known presets: qwen2.5-7b, smollm2-135m"):
        get_preset("llama-70b")
    with pytest.raises(ValueError, match="unknown preset fields"):
        big.replace(batch=4)
    with pytest.raises(ValueError, match="group_size"):
        big.replace(group_size=1)
    with pytest.raises(ValueError, match="rollout_engine"):
        big.replace(rollout_engine="sglang")
    cfg = big.rl_config(steps=3)
    assert (cfg.prompts, cfg.group_size, cfg.max_new_tokens, cfg.lr, cfg.steps) == (8, 8, 512, 2e-5, 3)
    json.dumps(big.to_dict())


def test_built_in_shapes_are_the_published_configs():
    pytest.importorskip("transformers")
    cfg = get_preset("qwen2.5-7b").model_config()
    assert type(cfg).__name__ == "Qwen2Config"
    assert (cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.num_attention_heads,
            cfg.num_key_value_heads, cfg.vocab_size, cfg.tie_word_embeddings, cfg.max_position_embeddings) == \
        (3584, 18944, 28, 28, 4, 152064, False, 32768)
    small = get_preset("smollm2-135m").model_config()
    assert (type(small).__name__, small.hidden_size, small.num_hidden_layers, small.tie_word_embeddings) == \
        ("LlamaConfig", 576, 30, True)


# ------------------------------------------------------------------------------------------------ counts
@pytest.mark.parametrize("family,extra", [
    ("qwen2", {}), ("qwen2", dict(tie_word_embeddings=True)), ("llama", {}),
    ("llama", dict(attention_bias=True, mlp_bias=True, tie_word_embeddings=False)),
    ("qwen3", dict(head_dim=16)), ("mistral", dict(head_dim=8))])
def test_param_count_is_exact(family, extra):
    """The formula against a real (tiny) model instantiated from the same config."""
    pytest.importorskip("transformers")
    from transformers import AutoConfig, AutoModelForCausalLM
    d = _tiny(family, **extra)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**d))
    counts = param_counts(d)
    assert counts["total"] == model.num_parameters() == sum(p.numel() for p in model.parameters())
    named = dict(model.named_parameters())
    part = lambda *keys: sum(p.numel() for n, p in named.items() if any(k in n for k in keys))
    assert counts["embeddings"] == part("embed_tokens")
    assert counts["attention"] == part("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj")
    assert counts["mlp"] == part("mlp.")
    assert counts["norms"] == part("norm")
    assert counts["lm_head"] == part("lm_head")


def test_qwen25_7b_has_7_62_billion_parameters():
    counts = param_counts("qwen2.5-7b-instruct")
    assert counts["total"] == QWEN7B
    assert abs(counts["total"] - 7.62e9) / 7.62e9 < 0.001
    assert counts["lm_head"] == counts["embeddings"] == 152064 * 3584           # untied
    assert param_counts("smollm2-135m-instruct")["total"] == 134_515_008         # tied: counted once


def test_lora_counts_match_peft():
    pytest.importorskip("peft")
    from transformers import AutoConfig, AutoModelForCausalLM

    from toy_rl.lm.lora import add_lora, count_trainable
    d = _tiny("qwen2")
    for targets in (ATTENTION, ATTENTION + MLP, ("q_proj", "v_proj")):
        model = add_lora(AutoModelForCausalLM.from_config(AutoConfig.for_model(**d)), rank=4, alpha=8,
                         target_modules=list(targets))
        assert count_trainable(model) == lora_params(d, 4, targets)
    # the numbers toy_rl.lm.lora quotes for SmolLM2 at rank 16
    assert lora_params("smollm2-135m-instruct", 16, ATTENTION) == 1_843_200
    assert lora_params("smollm2-135m-instruct", 16, ATTENTION + MLP) == 4_884_480
    assert lora_params("qwen2.5-7b-instruct", 16, ATTENTION + MLP) == 40_370_176
    with pytest.raises(ValueError, match="not linear layers"):
        lora_params(d, 4, ["q_proj", "qkv_proj"])


def _saved_bytes_per_token(d, dtype, targets, checkpointing=False, B=2, T=24):
    """Bytes autograd keeps for the backward pass, per token (parameters excluded)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from toy_rl.lm.dry_run import enable_gradient_checkpointing
    from toy_rl.lm.lora import add_lora
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**d)).to(dtype)
    model = add_lora(model, rank=4, alpha=8, target_modules=list(targets))
    if checkpointing:
        enable_gradient_checkpointing(model)
    model.train()
    params = {t.untyped_storage().data_ptr() for t in list(model.parameters()) + list(model.buffers())}
    seen = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            seen[ptr] = t.untyped_storage().nbytes()
        return t
    ids = torch.randint(0, d["vocab_size"], (B, T))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, attention_mask=torch.ones_like(ids), logits_to_keep=1)
    return sum(seen.values()) / (B * T)


@pytest.mark.parametrize("family", ["qwen2", "llama", "qwen3"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("targets", [ATTENTION, ATTENTION + MLP, ("q_proj", "v_proj")])
def test_activation_formula_matches_what_autograd_saves(family, dtype, targets):
    """One more decoder layer adds exactly layer_activation_bytes per token."""
    pytest.importorskip("peft")
    import torch
    torch.set_num_threads(1)
    extra = dict(head_dim=16) if family == "qwen3" else {}
    one, two = (_saved_bytes_per_token(dict(_tiny(family, **extra), num_hidden_layers=n), getattr(torch, dtype),
                                       targets) for n in (1, 2))
    assert two - one == layer_activation_bytes(_tiny(family, **extra), dtype, 4, targets)


def test_checkpointing_keeps_only_each_layers_input():
    pytest.importorskip("peft")
    import torch
    one, two = (_saved_bytes_per_token(dict(_tiny("qwen2"), num_hidden_layers=n), torch.bfloat16, ATTENTION + MLP,
                                       checkpointing=True) for n in (1, 2))
    assert two - one == 2 * TINY["hidden_size"]                   # a * H, bf16


def test_score_keeps_the_logits_in_the_heads_dtype_and_nothing_else_of_vocabulary_size():
    """HFPolicy.score keeps only the head's bf16 logits until backward (2 bytes a value: within the estimate's
    LOGIT_KEPT_BYTES, the float32 case); the softmax is remade from them a chunk of rows at a time."""
    pytest.importorskip("peft")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from toy_rl.lm.lora import add_lora
    from toy_rl.lm.policy import HFPolicy
    V, B, P, N = 300, 4, 5, 7
    d = dict(_tiny("qwen2"), vocab_size=V)
    model = add_lora(AutoModelForCausalLM.from_config(AutoConfig.for_model(**d)).to(torch.bfloat16), rank=4, alpha=8)
    tok = type("Tok", (), {"pad_token_id": 0, "eos_token_id": 0, "bos_token_id": None})()
    policy = HFPolicy(model, tok, stop_ids=[0], share_prompts=False).train()
    ids = torch.randint(1, V, (B, P + N))
    params = {t.untyped_storage().data_ptr() for t in model.parameters()}
    seen = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if t.shape[-1:] == (V,) and ptr not in params:
            seen[ptr] = t.untyped_storage().nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        policy.score(ids, torch.ones_like(ids), P)
    assert sum(seen.values()) == B * N * V * 2 <= B * N * V * LOGIT_KEPT_BYTES


# ------------------------------------------------------------------------------------------------ estimate
def test_qwen7b_estimate_numbers():
    d = estimate(None, "qwen2.5-7b", micro_batch=64)               # the whole update in one forward
    m, b = d["memory"], d["batch"]
    assert d["params"]["total"] == QWEN7B and d["lora_params"] == 40_370_176
    assert m["weights"] == QWEN7B * 2
    assert m["lora_state"] == 40_370_176 * 16
    assert m["kv_cache"] == 2 * 28 * 4 * 128 * 2 * 64 * (256 + 512)
    assert m["logits_one_fp32_copy"] == 64 * 512 * 152064 * 4
    assert m["logits"] == 4 * m["logits_one_fp32_copy"]
    assert b["train_tokens_per_forward"] == 64 * 768 and not b["shared_prompts"]
    assert m["activations_ckpt"] < m["activations_no_ckpt"] / 5
    assert m["total"] >= max(m["train_peak"], m["rollout_peak"])
    assert d["fits"] is True                                       # 141 GB H200
    assert estimate(None, "qwen2.5-7b", hardware="h100", micro_batch=64)["fits"] is False
    preset = estimate(None, "qwen2.5-7b", hardware="h100")        # the preset's own micro-batch: one group
    assert preset["batch"]["micro_batch"] == 8 and preset["fits"] is True
    assert preset["memory"]["logits"] == d["memory"]["logits"] / 8
    assert preset["flops"]["train"] > d["flops"]["train"]          # plus the no-grad pass BAPO searches on
    assert estimate(None, "qwen2.5-7b", gpu_gib=20)["fits"] is False
    assert d["flops"]["train"] > 0 and 0 < d["seconds"]["train"] < d["seconds"]["update"]
    assert any("micro-batches" in a for a in d["advice"])
    json.dumps(d)


def test_time_model():
    """LoRA training: 4 x forward FLOPs without checkpointing, 6 x with (the forward runs twice)."""
    on = estimate(None, "qwen2.5-7b", micro_batch=64)                  # one forward for the whole update
    off = estimate(None, "qwen2.5-7b", micro_batch=64, gradient_checkpointing=False)
    head = 4 * 152064 * 3584 * 64 * 512
    assert (on["flops"]["train"] - head) / (off["flops"]["train"] - head) == pytest.approx(1.5)
    fwd = (off["flops"]["train"] - head) / 2
    mm = param_counts("qwen2.5-7b-instruct")["matmul_per_token"]
    assert fwd == pytest.approx(2 * mm * 64 * 768, rel=0.02)          # + attention, ~1 %
    vllm = estimate(None, "qwen2.5-7b", micro_batch=64, rollout_engine="vllm")
    assert vllm["seconds"]["rollout"] < on["seconds"]["rollout"]        # no per-step Python overhead
    assert vllm["memory"]["vllm_weights"] == on["memory"]["weights"]


def test_smollm2_estimate_on_cpu():
    d = estimate(None, "smollm2-135m")
    assert d["params"]["total"] == 134_515_008 and d["lora_params"] == 1_843_200
    assert d["batch"]["shared_prompts"] and d["memory"]["overhead"] == 0
    assert d["memory"]["total"] < 4 * GIB
    assert 1 < d["seconds"]["update"] < 60                    # rung 3 measured ~8 s (5 s rollout + 2.9 s update)


def test_cpu_micro_batches_hold_their_graphs():
    """On the CPU, BAPO's search pass holds every micro-batch's graph (HFPolicy.hold_graphs): the training peak
    counts the other three micro-batches' activations and kept logits, and no second forward; on a GPU, neither."""
    whole = estimate(None, "smollm2-135m", max_new_tokens=96)
    cpu = estimate(None, "smollm2-135m", micro_batch=16, max_new_tokens=96)
    gpu = estimate(None, "smollm2-135m", hardware="h100", micro_batch=16, max_new_tokens=96)
    m = cpu["memory"]
    assert m["held_graphs"] == 3 * (m["activations_kept"] + m["logits_kept"]) and gpu["memory"]["held_graphs"] == 0
    assert m["train_peak"] == pytest.approx(m["weights"] + m["lora_state"] + m["held_graphs"] + max(
        m["activations_kept"] + m["logits"], m["activations"] + m["logits_kept"]))
    assert cpu["flops"]["train"] == pytest.approx(whole["flops"]["train"], rel=0.05)     # no second forward
    assert gpu["flops"]["train"] > 1.4 * cpu["flops"]["train"]                           # a no-grad pass first
    assert "holds every one's graph" in format_estimate(cpu) and "held (BAPO, CPU)" in format_estimate(cpu)


def test_config_inputs_agree(tmp_path):
    pytest.importorskip("transformers")
    d = dict(SHAPES["qwen2.5-7b-instruct"])
    (tmp_path / "config.json").write_text(json.dumps({**d, "architectures": ["Qwen2ForCausalLM"]}))
    ref = estimate(None, "qwen2.5-7b")["memory"]
    for cfg in (d, "qwen2.5-7b-instruct", tmp_path, tmp_path / "config.json",
                get_preset("qwen2.5-7b").model_config()):
        assert estimate(cfg, "qwen2.5-7b")["memory"] == ref
    assert read_config(tmp_path)["hidden_size"] == 3584
    assert estimate(None, {"preset": "qwen2.5-7b", "max_new_tokens": 256})["batch"]["answer_tokens"] == 256


def test_estimate_errors(tmp_path):
    with pytest.raises(ValueError, match="Llama-style"):
        shape_of({"model_type": "gpt2", "n_embd": 768})
    with pytest.raises(ValueError, match="no config.json"):
        estimate(tmp_path, "qwen2.5-7b")
    with pytest.raises(ValueError, match="micro_batch"):
        estimate(None, "qwen2.5-7b", micro_batch=0)
    with pytest.raises(ValueError, match="context"):
        estimate(None, "qwen2.5-7b", max_new_tokens=40000)
    with pytest.raises(ValueError, match="unknown hardware"):
        estimate(None, "qwen2.5-7b", hardware="tpu")
    with pytest.raises(ValueError, match="not linear layers"):
        estimate(None, "qwen2.5-7b", lora_targets=("qkv_proj",))


def test_format_estimate():
    text = format_estimate(estimate(None, "qwen2.5-7b"))
    for word in ("weights (bfloat16)", "LoRA adapters", "activations, checkpointed", "logits", "KV cache",
                 "GiB", "fits", "rollout", "training", "152,064"):
        assert word in text
    assert "DOES NOT FIT" in format_estimate(estimate(None, "qwen2.5-7b", hardware="h100", micro_batch=64))
    assert "all kept" in format_estimate(estimate(None, "smollm2-135m"))


# ------------------------------------------------------------------------------------------------ CLI
def test_cli_estimate(capsys, tmp_path):
    assert main(["estimate", "--preset", "qwen2.5-7b", "--gpu-gib", "141"]) == 0
    out = capsys.readouterr().out
    assert "7,615,616,512" in out and "of 141.0 GiB" in out
    assert main(["estimate", "--json", "--micro-batch", "8", "--gpu", "h100"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["batch"]["micro_batch"] == 8 and d["fits"] is True
    (tmp_path / "config.json").write_text(json.dumps(_tiny("llama")))
    assert main(["estimate", "--preset", "smollm2-135m", "--model", str(tmp_path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["params"]["total"] == param_counts(_tiny("llama"))["total"]


def test_cli_estimate_bad_input_is_one_line(capsys):
    assert main(["estimate", "--preset", "gpt-5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "known presets" in err
    assert main(["estimate", "--model", "/no/such/folder"]) == 2
    assert "no config.json" in capsys.readouterr().err
