"""Rung 3's bfloat16 compute path on a tiny random Llama (no download): how "auto" resolves, which tensors stay
float32, on-policy ratios of exactly 1, bf16 close to fp32, and the dtype in run configs (missing = float32)."""
import json
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")
pytest.importorskip("peft", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")

import torch  # noqa: E402

import toy_rl.lm.load as L  # noqa: E402
from test_lm_run import TINY, FirstDigitTask, spec, tiny_llama  # noqa: E402
from toy_rl.clipping import policy_loss  # noqa: E402
from toy_rl.experiments import finished, make_spec, run, status  # noqa: E402
from toy_rl.lm.run import run_dtype  # noqa: E402
from toy_rl.rl.config import RLConfig  # noqa: E402
from toy_rl.rl.loop import _update, make_optimizer  # noqa: E402
from toy_rl.rl.sources import BatchSource  # noqa: E402

CFG = RLConfig(group_size=4, max_new_tokens=6)
LOGGED = Path(__file__).resolve().parents[1] / "results" / "smollm2-135m-add" / "on-policy" / "clip-higher" / "seed0"


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (tests/conftest.py)."""


def policy(dtype="float32"):
    """The tiny policy with non-zero adapters (so they matter), in ``dtype``."""
    torch.manual_seed(0)
    p = tiny_llama()
    with torch.no_grad():
        for name, w in p.model.named_parameters():
            if "lora_B" in name:
                w.normal_(0, 0.5)
    return p.set_dtype(dtype)


def batch_of(p, seed=0):
    return BatchSource(p, FirstDigitTask(), prompts=3, group_size=4, max_new_tokens=6, seed=seed).next(0)


def scored_on_and_off(p, b, switch: str) -> list:
    """[(log-probs, entropies, adapter gradients)] of batch ``b`` under ``p`` with its attribute ``switch`` on, then
    off (left on)."""
    out = []
    for on in (True, False):
        setattr(p, switch, on)
        p.model.zero_grad()
        logp, ent = p.score(b.input_ids, b.attention_mask, b.start)
        (logp * b.response_mask).sum().backward()
        out.append((logp.detach(), ent, [w.grad.clone() for w in p.trainable_parameters()]))
    setattr(p, switch, True)
    return out


def test_auto_follows_the_cpu_and_gpu_capability(monkeypatch):
    for capability, flags, want in [("AVX512", {"avx512f", "avx512_bf16"}, "bfloat16"),
                                    ("AVX512", {"amx_bf16"}, "bfloat16"), ("AVX512", {"avx512f"}, "float32"),
                                    ("AVX2", {"amx_bf16", "avx512_bf16"}, "float32")]:
        monkeypatch.setattr(L, "cpu_capability", lambda: capability)
        monkeypatch.setattr(L, "cpu_flags", lambda: flags)
        assert L.resolve_dtype("auto", "cpu") == want, (capability, flags)
        assert L.resolve_dtype("float32", "cpu") == "float32" and L.resolve_dtype("bf16") == "bfloat16"
    monkeypatch.setattr(L, "resolve_device", lambda device: torch.device("cuda"))
    for supported in (True, False):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: supported)
        assert L.resolve_dtype("AUTO", "cuda") == ("bfloat16" if supported else "float32")
    assert L.resolve_dtype(None) == "float32" and L.resolve_dtype(torch.bfloat16) == "bfloat16"


def test_bad_dtype_is_a_clear_value_error():
    for bad in ("bf32", "int8", 16):
        with pytest.raises(ValueError, match="dtype must be one of .'auto', 'float32', 'bfloat16'"):
            L.resolve_dtype(bad)
    with pytest.raises(ValueError, match="dtype must be one of"):
        make_spec("lm", FirstDigitTask(), model=tiny_llama, dtype="half-float")
    with pytest.raises(ValueError, match="dtype must be one of"):
        tiny_llama().set_dtype("fp8")


def test_bf16_base_with_fp32_adapters_grads_and_adam_state():
    p = policy("bfloat16")
    frozen = [w for w in p.model.parameters() if not w.requires_grad]
    assert frozen and all(w.dtype == torch.bfloat16 for w in frozen)
    assert p.dtype == torch.bfloat16 and p.rescore
    assert all(w.dtype == torch.float32 for w in p.trainable_parameters())
    opt = make_optimizer(p, 1e-2)
    stats, logp, _ = _update(p, opt, batch_of(p), CFG.rule_obj, CFG)
    assert logp.dtype == torch.float32 and stats["grad_norm"] > 0
    assert all(w.dtype == w.grad.dtype == torch.float32 for w in p.trainable_parameters())
    states = [t for s in opt.state.values() for t in s.values() if t.is_floating_point() and t.dim() > 0]
    assert states and all(t.dtype == torch.float32 for t in states)
    assert all(w.dtype == torch.bfloat16 for w in frozen)      # the step did not touch the base


@pytest.mark.parametrize("how", ["scored by the update", "rescored by the sampler", "not rescored"])
def test_on_policy_ratio_is_exactly_one_in_bf16(how, monkeypatch):
    """The sampler's log-probs are made off by a little (as bf16 rounding makes them on SmolLM2, ~0.013 nats): an
    on-policy batch gets the update's own log-probs as its old log-probs (by default) or the sampler scores its
    answers again; either way the update sees ratios of exactly 1 and the gap is reported. Without, not 1."""
    p = policy("bfloat16")
    sample_batch = p._sample_batch

    def off(*args):
        return [(t, [x + 0.01 for x in lp], done) for t, lp, done in sample_batch(*args)]
    p._sample_batch = off
    p.rescore = how != "not rescored"
    monkeypatch.setattr(BatchSource, "update_scores_on_policy", how == "scored by the update")
    b = batch_of(p)
    assert b.old_logp_from_update == (how == "scored by the update")
    _, logp, trained = _update(p, make_optimizer(p, 1e-12), b, CFG.rule_obj, CFG)
    gap = p.pop_logp_gap()
    m = b.response_mask.bool()
    diff = (logp - trained.old_logp)[m]
    if how == "not rescored":
        assert gap is None and diff.abs().min().item() > 0.005
    else:
        # the offset plus the sampler's own bf16 rounding (a few 1e-6 here: the lean decode step merges LoRA)
        assert gap == pytest.approx(0.01, abs=1e-4) and diff.abs().max().item() == 0.0
        assert torch.exp(diff).eq(1).all() and not trained.old_logp_from_update
        assert (trained.old_logp[~m] == 0).all()


@pytest.mark.parametrize("rule", ["symmetric", "bapo"])
@pytest.mark.parametrize("kw", [dict(staleness=2), dict(staleness=0), dict(staleness=2, micro_batch=3)],
                         ids=["reuse-2", "on-policy", "reuse-2-micro"])
def test_old_logprobs_from_the_update_change_no_number_of_a_run(rule, kw, tmp_path, monkeypatch):
    """A bf16 run whose on-policy batches take their old log-probs from the update (one forward fewer) writes the
    same metrics, bit for bit, as one whose sampler scores every answer again; the gap is logged the same."""
    from toy_rl.rl.loop import train
    out = {}
    for on in (True, False):
        monkeypatch.setattr(BatchSource, "update_scores_on_policy", on)
        p = policy("bfloat16")
        cfg = RLConfig(rule=rule, steps=4, prompts=2, group_size=4, max_new_tokens=6, lr=0.3, eval_every=0,
                       checkpoint_every=4, **kw)
        folder = tmp_path / str(on)
        gaps = []
        train(cfg, p, FirstDigitTask(), folder, progress=False,
              on_update=lambda record, batch, logp: gaps.append(p.pop_logp_gap()))
        lines = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        out[on] = [{k: v for k, v in r.items() if k != "seconds"} for r in lines], gaps, p.get_weights()
    (rec_on, gap_on, w_on), (rec_off, gap_off, w_off) = out[True], out[False]
    assert rec_on == rec_off and all(torch.equal(w_on[k], w_off[k]) for k in w_on)
    fresh = kw["staleness"] + 1                                 # a rollout every `fresh` updates: its gap is logged
    assert [g is None for g in gap_on] == [g is None for g in gap_off] == [i % fresh > 0 for i in range(4)]
    assert [g for g in gap_on if g] == pytest.approx([g for g in gap_off if g], rel=1e-12)
    assert all(r["ratio_max"] == r["ratio_min"] == 1.0 for r in rec_on[:4:fresh])            # on-policy: exactly 1


def test_bf16_loss_and_gradients_close_to_fp32():
    b = batch_of(policy("float32"), seed=3)
    adv = torch.linspace(-1, 1, b.advantages.numel())            # every answer counts, both signs
    out = {}
    for dtype in ("float32", "bfloat16"):
        p = policy(dtype).train()
        logp, _ = p.score(b.input_ids, b.attention_mask, b.start)
        loss, _ = policy_loss(logp, b.old_logp, adv, b.response_mask, RLConfig(rule="symmetric").rule_obj)
        loss.backward()
        out[dtype] = loss.item(), torch.cat([w.grad.flatten() for w in p.trainable_parameters()])
    (l32, g32), (l16, g16) = out["float32"], out["bfloat16"]
    assert abs(l16 - l32) <= 0.05 * abs(l32) + 1e-3
    assert torch.nn.functional.cosine_similarity(g16, g32, dim=0) > 0.99
    assert 0 < (g16 - g32).norm() <= 0.1 * g32.norm()             # bf16 did compute in bf16


def test_logged_runs_without_dtype_are_float32(tmp_path):
    assert "dtype" not in json.loads((LOGGED / "config.json").read_text())
    assert run_dtype(LOGGED) == run_dtype({}) == "float32" and run_dtype({"dtype": "bfloat16"}) == "bfloat16"
    # an old run (config.json without dtype) resumes as float32; a bf16 spec may not resume it
    run(spec(where=tmp_path, steps=2))
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved.pop("dtype") == "float32"
    (tmp_path / "config.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="holds a float32 run; this spec computes in bfloat16"):
        run(spec(where=tmp_path, steps=3, dtype="bfloat16"))
    assert status(spec(where=tmp_path, steps=3)) == "resumed"
    records = run(spec(where=tmp_path, steps=3))
    assert records[-1]["final"] and all("logp_gap" not in r for r in records)
    assert run_dtype(tmp_path) == "float32"


def test_bf16_run_records_its_dtype_and_the_gap(tmp_path):
    shutil.rmtree(tmp_path, ignore_errors=True)
    s = spec(where=tmp_path, steps=2, dtype="bfloat16")
    records = run(s)
    assert json.loads((tmp_path / "config.json").read_text())["dtype"] == "bfloat16"
    assert run_dtype(tmp_path) == "bfloat16"
    updates = [r for r in records if not r.get("final")]
    assert len(updates) == 2 and all(r["logp_gap"] >= 0 for r in updates)
    assert all(r["clip_frac_low"] == r["clip_frac_high"] == 0 for r in updates[:1])   # on-policy: ratios are 1
    assert status(s) == "finished" and TINY["prompts"] == 2
    assert status(spec(where=tmp_path, steps=2, dtype="float32")) != "finished"   # never read back as fp32's


@pytest.mark.parametrize("key, value", [("attention", "grouped"), ("lora_products", "bfloat16")])
def test_a_run_records_its_bf16_kernels_and_resumes_as_it_started(tmp_path, key, value):
    """A bf16 run on the CPU records the kernels that round apart from the ones before them (grouped attention,
    LoRA products in bf16); a run started before one (its config.json does not name it) resumes without it; a
    float32 run names neither."""
    run(spec(where=tmp_path / "fp32", steps=1))
    assert not {"attention", "lora_products"} & set(json.loads((tmp_path / "fp32" / "config.json").read_text()))
    run(spec(where=tmp_path, steps=2, dtype="bfloat16"))
    path = tmp_path / "config.json"
    config = json.loads(path.read_text())
    assert config[key] == value
    del config[key]
    path.write_text(json.dumps(config))
    longer = spec(where=tmp_path, steps=3, dtype="bfloat16")
    assert status(longer) == "resumed"
    run(longer)
    assert key not in json.loads(path.read_text())


def test_a_finished_fp32_run_is_not_read_back_for_a_bf16_spec(tmp_path):
    run(spec(where=tmp_path, steps=2))
    assert finished(spec(where=tmp_path, steps=2)) is not None
    assert finished(spec(where=tmp_path, steps=2, dtype="bfloat16")) is None


def test_estimate_uses_the_dtypes_measured_cpu_peak():
    from toy_rl.lm.estimate import HARDWARE, estimate
    assert HARDWARE["cpu"].peak_tflops["float32"] == 0.16 and HARDWARE["cpu"].peak_tflops["bfloat16"] == 1.06
    fp32, auto = (estimate(None, {"preset": "smollm2-135m", "dtype": dt}) for dt in ("float32", "auto"))
    assert auto["settings"]["dtype"] == "bfloat16"
    assert fp32["seconds"]["train"] / auto["seconds"]["train"] == pytest.approx(1.06 / 0.16)


def test_a_run_names_the_cpus_bf16_units(monkeypatch):
    """bf16 results differ in their last bits between CPUs with and without AMX: a bf16 run on a CPU records which
    units it had (config.json's cpu_bf16), and oneDNN's ISA cap when one is set."""
    from toy_rl.lm import load
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.setattr(load, "cpu_flags", lambda: {"avx512f", "amx_bf16", "avx512_bf16"})
    assert load.cpu_bf16_units() == "amx_bf16+avx512_bf16"
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
    assert load.cpu_bf16_units() == "amx_bf16+avx512_bf16 (ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16)"
    monkeypatch.setattr(load, "cpu_flags", lambda: {"avx2"})
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    assert load.cpu_bf16_units() == "none"


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("share", [True, False])
def test_the_head_on_answer_tokens_only_gives_the_same_numbers(dtype, share):
    """``score`` runs the LM head and log-softmax on real answer tokens only: log-probs, entropies and
    gradients equal those of the head over every position up to rounding (the head multiplies a matrix of another
    shape: float32 log-probs moved by 2e-7 with shared prompts here; SmolLM2's bf16 log-probs not at all);
    padding reads 0. A token scored at the wrong position would be off by about a nat."""
    p = policy(dtype)
    b = batch_of(p)
    m = b.response_mask.bool()
    assert not m.all()                                   # answers of different lengths: some padding to skip
    p.share_prompts, p.pack_answers = share, False     # the head alone (packed answers: tests/test_lm_packing.py)
    (lp_on, ent_on, g_on), (lp_off, ent_off, g_off) = scored_on_and_off(p, b, "head_on_answers")
    assert p._body_and_head() is not None                 # a Llama: the answer-only head ran
    tol = {"float32": 1e-5, "bfloat16": 0.05}[dtype]
    assert torch.allclose(lp_on[m], lp_off[m], atol=tol) and torch.allclose(ent_on[m], ent_off[m], atol=tol)
    assert (lp_on[~m] == 0).all() and (ent_on[~m] == 0).all()
    # each adapter's gradient as a whole (bf16 rounding is relative to the summands, so a near-zero entry of a
    # gradient can move by more than tol of itself: one of 128 entries did, by 0.012 of a gradient as large as 2.4)
    assert all(torch.linalg.vector_norm(a - c) <= tol * torch.linalg.vector_norm(c) for a, c in zip(g_on, g_off))
