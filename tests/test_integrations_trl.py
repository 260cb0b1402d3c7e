"""toy_rl.integrations.trl: any toy_rl rule inside TRL 1.16's GRPOTrainer, checked against TRL's own loss.

Skipped when TRL is not installed (the ``trl`` extra: ``bash scripts/setup.sh dev,llm,verl,trl``, what CI runs).
A tiny GPT-2 with toy_rl's character vocabulary is built here (nothing downloaded).
"""
import warnings

import pytest
import torch

trl = pytest.importorskip("trl", reason="TRL is not installed: the trl extra (scripts/setup.sh dev,llm,verl,trl)")

from datasets import Dataset  # noqa: E402  (a TRL dependency)
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from toy_rl.arithmetic.hf_twin import char_tokenizer, gpt2_twin  # noqa: E402
from toy_rl.arithmetic.model.gpt import GPT, ModelConfig  # noqa: E402
from toy_rl.clipping import BAPO, ClipHigher, FixedBounds, Symmetric  # noqa: E402
from toy_rl.integrations.trl import ON_POLICY_WARNING, ClippingGRPOTrainer  # noqa: E402

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
MAX_LEN = 8


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):
    yield


def tiny_model(seed=0):
    torch.manual_seed(seed)
    return gpt2_twin(GPT(ModelConfig(n_layer=1, d_model=32, n_head=2, block_size=32))).train()


def prompts():
    return Dataset.from_dict({"prompt": [f"{a}+{b}=" for a in range(6) for b in range(6)]})


def stops_early(prompts, completions, **kw):
    """Reward 1 for a completion that ends before the length cap: the failures are the long ones
    (wrong answers longer than right ones, λ > 1), so on-policy ρ < 0.5 and BAPO's search has work."""
    return [float(len(c) < MAX_LEN) for c in completions]


def config(tmp_path, **overrides):
    settings = dict(output_dir=str(tmp_path), per_device_train_batch_size=32, num_generations=8,
                    max_completion_length=MAX_LEN, num_iterations=2, beta=0.0, loss_type="dapo", learning_rate=1e-2,
                    use_cpu=True, report_to="none", logging_steps=1, save_strategy="no", disable_tqdm=True,
                    max_steps=3, seed=0, temperature=1.0, top_k=0, top_p=1.0, shuffle_dataset=False)
    settings.update(overrides)
    return GRPOConfig(**settings)


def trainer(tmp_path, cls=ClippingGRPOTrainer, model=None, **kwargs):
    args = config(tmp_path, **kwargs.pop("settings", {}))
    return cls(model=model or tiny_model(), reward_funcs=stops_early, args=args, train_dataset=prompts(),
               processing_class=char_tokenizer(), **kwargs)


def logged(tr, key):
    return [h[key] for h in tr.state.log_history if key in h]


def test_bapo_trains_three_steps_and_its_bounds_move(tmp_path):
    tr = trainer(tmp_path, rule=BAPO())
    tr.train()
    c_low, c_high, rho = logged(tr, "clipping/c_low"), logged(tr, "clipping/c_high"), logged(tr, "clipping/rho")
    assert len(c_high) == 3                           # 3 optimizer steps: generation 1 twice, then generation 2
    assert max(c_high) > 1.2 or max(c_low) > 0.6      # the search left its start [0.6, 1.2] (on the stale reuse)
    assert all(0.6 <= lo <= 0.9 and 1.2 <= hi <= 3.0 for lo, hi in zip(c_low, c_high))
    assert all(0.0 <= r <= 1.0 for r in rho)
    for key in ("clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean", "clipping/rho_reached"):
        assert len(logged(tr, key)) == 3


def test_fixed_rule_logs_its_own_bounds(tmp_path):
    tr = trainer(tmp_path, rule=FixedBounds(0.7, 1.5), settings=dict(max_steps=1))
    tr.train()
    assert logged(tr, "clipping/c_low") == [pytest.approx(0.7)]
    assert logged(tr, "clipping/c_high") == [pytest.approx(1.5)]
    assert not logged(tr, "clipping/rho_reached")


def test_on_policy_warns_once(tmp_path):
    tr = trainer(tmp_path, rule="bapo", settings=dict(num_iterations=1, max_steps=2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tr.train()
    ours = [w for w in caught if str(w.message) == ON_POLICY_WARNING]
    assert len(ours) == 1
    assert set(logged(tr, "clip_ratio/region_mean")) == {0.0}     # r = 1: nothing is ever clipped


def test_stale_data_does_not_warn(tmp_path):
    tr = trainer(tmp_path, rule="symmetric", settings=dict(max_steps=1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tr.train()
    assert not [w for w in caught if str(w.message) == ON_POLICY_WARNING]


@pytest.mark.parametrize("settings, name", [
    (dict(loss_type="sapo"), "loss_type='sapo'"),
    (dict(importance_sampling_level="sequence"), "importance_sampling_level"),
    (dict(top_entropy_quantile=0.5), "top_entropy_quantile"),
    (dict(off_policy_mask_threshold=0.5), "off_policy_mask_threshold"),
])
def test_unsupported_settings_are_refused_by_name(tmp_path, settings, name):
    with pytest.raises(ValueError, match="does not support.*" + name.replace("(", r"\(")):
        trainer(tmp_path, rule="bapo", settings=settings)


def test_a_rule_is_required_and_checked(tmp_path):
    with pytest.raises(TypeError):
        trainer(tmp_path)
    with pytest.raises(ValueError, match="unknown rule"):
        trainer(tmp_path, rule="ppo")
    with pytest.raises(ValueError, match="clipping rule"):
        trainer(tmp_path, rule=0.2)


# ------------------------------------------------------------------- parity with TRL's own loss
def stale_inputs(model, seed=0, B=6, P=3, T=MAX_LEN):
    """A hand-made micro-batch as GRPOTrainer hands it to _compute_loss, its old log-probs off by up to ±0.6
    (so both bounds of [0.8, 1.28] bind), one completion of a single token."""
    g = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    prompt_ids = torch.randint(3, vocab, (B, P), generator=g)
    completion_ids = torch.randint(3, vocab, (B, T), generator=g)
    lengths = torch.tensor([T, 1, 5, T, 3, 7])[:B]
    completion_mask = (torch.arange(T)[None] < lengths[:, None]).long()
    with torch.no_grad():
        logits = model(input_ids=torch.cat([prompt_ids, completion_ids], 1)).logits[:, P - 1:-1]
        logp = torch.log_softmax(logits.float(), -1).gather(-1, completion_ids[..., None])[..., 0]
    old = logp + (torch.rand(B, T, generator=g) - 0.5) * 1.2
    return dict(prompt_ids=prompt_ids, prompt_mask=torch.ones_like(prompt_ids), completion_ids=completion_ids,
                completion_mask=completion_mask, advantages=torch.randn(B, generator=g), old_per_token_logps=old,
                num_items_in_batch=completion_mask.sum())


def loss_and_grads(tr, inputs):
    tr.model.zero_grad()
    tr.current_gradient_accumulation_steps = 1
    loss = tr._compute_loss(tr.model, inputs)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in tr.model.parameters() if p.grad is not None], tr._metrics["train"]


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_clip_higher_equals_trls_own_loss(tmp_path, loss_type, beta):
    """ClipHigher(0.2, 0.28) through our trainer = GRPOTrainer with epsilon 0.2, epsilon_high 0.28:
    loss, every parameter's gradient and the clip ratios TRL logs."""
    settings = dict(loss_type=loss_type, epsilon=0.2, epsilon_high=0.28)
    ours = trainer(tmp_path / "ours", rule=ClipHigher(0.2, 0.28), settings=settings)
    theirs = trainer(tmp_path / "trl", cls=GRPOTrainer, model=tiny_model(), settings=settings)
    inputs = stale_inputs(ours.model)
    if beta:             # set after __init__, which would otherwise build a reference model from a hub id
        ours.beta = theirs.beta = beta
        inputs["ref_per_token_logps"] = inputs["old_per_token_logps"] - 0.1
    loss_a, grads_a, log_a = loss_and_grads(ours, inputs)
    loss_b, grads_b, log_b = loss_and_grads(theirs, inputs)
    torch.testing.assert_close(loss_a, loss_b, rtol=1e-5, atol=1e-7)
    assert len(grads_a) == len(grads_b)
    for a, b in zip(grads_a, grads_b):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
    for key in ("clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean", "entropy"):
        assert log_a[key] == pytest.approx(log_b[key], rel=1e-6, abs=1e-9), key
    assert log_a["clip_ratio/low_mean"][0] > 0 and log_a["clip_ratio/high_mean"][0] > 0   # both sides bind
    if beta:
        assert log_a["kl"] == pytest.approx(log_b["kl"], rel=1e-6)


def test_delta_is_dual_clip(tmp_path):
    """TRL's two-sided GRPO (delta > 1 + epsilon_high caps the ratio) = our dual-clip with c = delta."""
    settings = dict(loss_type="bnpo", epsilon=0.2, delta=1.5)
    ours = trainer(tmp_path / "ours", rule=Symmetric(0.2), settings=settings)
    theirs = trainer(tmp_path / "trl", cls=GRPOTrainer, model=tiny_model(), settings=settings)
    inputs = stale_inputs(ours.model, seed=1)
    loss_a, grads_a, _ = loss_and_grads(ours, inputs)
    loss_b, grads_b, _ = loss_and_grads(theirs, inputs)
    torch.testing.assert_close(loss_a, loss_b, rtol=1e-5, atol=1e-7)
    for a, b in zip(grads_a, grads_b):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
    ours.dual_clip = None                              # the cap binds on this batch: without it the loss differs
    assert not torch.isclose(loss_and_grads(ours, inputs)[0], loss_a)
