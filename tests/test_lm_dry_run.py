"""Rung 4 without a GPU: the meta-device dry run, gradient checkpointing with the preset's scoring
settings, the vLLM module's "absent" path and its HF re-scoring, and bench/gpu_check.py's CPU smoke."""
import importlib.util
import json
import os
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")
pytest.importorskip("peft", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")

import torch  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

from toy_rl.cli import main  # noqa: E402
from toy_rl.lm.dry_run import dry_run, enable_gradient_checkpointing  # noqa: E402
from toy_rl.lm.estimate import param_counts  # noqa: E402
from toy_rl.lm.lora import add_lora  # noqa: E402
from toy_rl.lm.policy import HFPolicy  # noqa: E402
from toy_rl.lm.presets import get_preset  # noqa: E402
from toy_rl.experimental.vllm_rollout import INSTALL, VLLMPolicy, is_available  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(model_type="qwen2", num_hidden_layers=2, vocab_size=64, hidden_size=32, intermediate_size=64,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024, eos_token_id=2, pad_token_id=2)


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (tests/conftest.py)."""


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "bench" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tiny_policy(gpu_check, checkpointing=False, share=True):
    torch.manual_seed(0)
    values = dict(TINY)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(values.pop("model_type"), **values)).eval()
    model = add_lora(model, rank=4, alpha=8, mlp=True)
    with torch.no_grad():                    # non-zero adapters, so they matter
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    if checkpointing:
        enable_gradient_checkpointing(model)
    return HFPolicy(model, gpu_check.IdTokenizer(64), stop_ids=[2], share_prompts=share)


# ------------------------------------------------------------------------------------------------ dry run
def test_dry_run_qwen7b_on_meta():
    lines = []
    t0 = time.perf_counter()
    r = dry_run("qwen2.5-7b", echo=lines.append)
    assert time.perf_counter() - t0 < 60
    assert r["params"] == r["params_formula"] == 7_615_616_512
    assert r["lora_params"] == r["lora_params_formula"] == 40_370_176
    assert (r["adapted_layers"], r["decoder_layers"], r["checkpointed_layers"]) == (196, 28, 28)
    assert r["adapter_dtypes"] == ["float32"] and r["model_class"] == "Qwen2ForCausalLM"
    assert "logits (2, 8, 152064) bfloat16" in r["forward"]
    text = "\n".join(lines)
    assert "all checks passed" in text and "fits" in text


def test_dry_run_smollm2_and_a_config_folder(tmp_path):
    r = dry_run("smollm2-135m", echo=None)
    assert (r["params"], r["lora_params"], r["checkpointed_layers"]) == (134_515_008, 1_843_200, 0)
    (tmp_path / "config.json").write_text(json.dumps({**TINY, "architectures": ["Qwen2ForCausalLM"]}))
    r = dry_run("qwen2.5-7b", model_config=tmp_path, echo=None, lora_rank=4)
    assert r["params"] == param_counts(TINY)["total"] and r["checkpointed_layers"] == 2


def test_dry_run_rejects_a_missing_target():
    with pytest.raises(ValueError, match="qkv_proj"):
        dry_run("smollm2-135m", echo=None, forward=False, lora_targets=("q_proj", "qkv_proj"))


def test_cli_estimate_dry_run(capsys):
    assert main(["estimate", "--preset", "smollm2-135m", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "all checks passed" in out and out.count("memory ") == 1


# ------------------------------------------------------------------------------------------------ scoring
def test_checkpointed_scoring_with_the_preset_settings_is_exact(gpu_check):
    """qwen2.5-7b scores with checkpointing on and share_prompts off: same log-probs as without checkpointing.
    (tests/test_lm_policy.py checks that share_prompts=True falls back to a full forward there.)"""
    from toy_rl.rl.rollout import Answer, Group, make_batch
    plain = _tiny_policy(gpu_check)
    prompts = [[11, 12, 13], [11, 12, 13], [20, 21, 22, 23], [20, 21, 22, 23]]
    outs = plain.sample(prompts, 6, 1.0, torch.Generator().manual_seed(0))
    groups = [Group(None, [Answer(prompts[i + k], *outs[i + k][:2], [0] * len(outs[i + k][0]), True)
                           for k in (0, 1)]) for i in (0, 2)]
    batch = make_batch(groups, lambda *_: 0.0, plain.decode, plain.pad_id)
    ckpt = _tiny_policy(gpu_check, checkpointing=True, share=get_preset("qwen2.5-7b").share_prompts)
    ckpt.train()
    got, _ = ckpt.score(batch.input_ids, batch.attention_mask, batch.start)
    got.sum().backward()                                    # gradients flow through the checkpointed layers
    plain.train()
    want, _ = plain.score(batch.input_ids, batch.attention_mask, batch.start)
    m = batch.response_mask
    assert torch.allclose(got.detach() * m, want.detach() * m, atol=1e-5)
    assert torch.allclose(want.detach() * m, batch.old_logp * m, atol=1e-4)     # sampled == scored
    assert all(p.grad is not None for p in ckpt.trainable_parameters())


# ------------------------------------------------------------------------------------------------ vLLM
@pytest.mark.skipif(is_available(), reason="vllm is installed here")
def test_vllm_absent_gives_install_advice():
    with pytest.raises(ImportError, match="pip install vllm") as err:
        VLLMPolicy(None, "Qwen/Qwen2.5-7B-Instruct")
    assert "rollout_engine='hf'" in str(err.value) and str(err.value) == INSTALL


def test_vllm_rescoring_gives_hf_logprobs(gpu_check):
    """The part of VLLMPolicy that runs without vLLM: behaviour log-probs recomputed by the HF model."""
    hf = _tiny_policy(gpu_check)
    prompts = [[11, 12, 13], [20, 21], [30, 31, 32, 33, 34]]
    outs = hf.sample(prompts, 5, 0.7, torch.Generator().manual_seed(1))
    fake = [(toks, [0.0] * len(toks), done) for toks, _, done in outs] + [([], [], False)]
    v = object.__new__(VLLMPolicy)
    v.hf, v.rescore, v.rescore_batch = hf, True, 2
    got = v._rescore(prompts + [[5, 6]], fake, 0.7)
    for (toks, lps, done), (t2, l2, d2) in zip(outs, got):
        assert toks == t2 and done == d2
        assert l2 == pytest.approx(lps, abs=1e-5)
    assert got[-1] == ([], [], False)
    assert v.pad_id == hf.pad_id                              # everything else is the HF policy's


# ------------------------------------------------------------------------------------------------ gpu_check
def test_gpu_check_cpu_smoke(gpu_check, tmp_path, capsys):
    out = tmp_path / "gpu_check.json"
    t0 = time.perf_counter()
    record = gpu_check.main(gpu_check.SMOKE.split() + ["--steps", "2", "--out", str(out)])
    assert time.perf_counter() - t0 < 30
    assert json.loads(out.read_text())["summary"] == record["summary"]
    assert record["shape"]["num_hidden_layers"] == 2 and record["shape"]["hidden_size"] == 256
    assert len(record["steps"]) == 2
    step = record["steps"][0]
    assert step["generated_tokens"] == 2 * 2 * 8                 # the stop id is never sampled: full length
    assert step["ratio_min"] == pytest.approx(1, abs=1e-4)       # on-policy, float32
    s = record["summary"]
    assert s["gen_tokens_per_s"] > 0 and s["train_tokens_per_s"] > 0 and s["max_memory_allocated_gib"] is None
    text = capsys.readouterr().out
    assert "| cpu |" in text and "| device |" in text


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_gpu_check_without_cuda_says_so(gpu_check, capsys):
    with pytest.raises(SystemExit) as err:
        gpu_check.main([])
    assert err.value.code == 2
    assert "CUDA is not available" in capsys.readouterr().err
