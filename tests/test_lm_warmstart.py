"""toy_rl.lm.warmstart: the LoRA warm start on worked answers, and its cache (tiny random Llama, no download)."""
import json

import pytest

pytest.importorskip("peft", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")

import torch  # noqa: E402
from test_lm_run import tiny_llama  # noqa: E402

from toy_rl.lm import ArithmeticTask  # noqa: E402
from toy_rl.lm import warmstart as ws  # noqa: E402


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("TOY_RL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(ws, "committed_dir", lambda: tmp_path / "committed")


class OneProblem(ArithmeticTask):
    """Always the same question, so the loss of its worked answer can only fall if the adapters learn it."""
    def generate(self, rng):
        return super().generate(__import__("random").Random(0))


def test_sft_lowers_the_answer_loss():
    losses = ws.sft(tiny_llama(), OneProblem(), steps=40, batch=4, lr=3e-2)
    assert len(losses) == 40
    assert losses[-1] < 0.9 * losses[0]


def test_only_the_adapters_move():
    policy = tiny_llama()
    frozen = {n: p.detach().clone() for n, p in policy.model.named_parameters() if not p.requires_grad}
    before = policy.get_weights()
    ws.sft(policy, ArithmeticTask(), steps=2, batch=4, lr=1e-2)
    after = policy.get_weights()
    assert any(not torch.equal(before[n], after[n]) for n in before)
    assert all(torch.equal(p, frozen[n]) for n, p in policy.model.named_parameters() if not p.requires_grad)


def test_warm_start_is_cached_and_read_back(tmp_path, monkeypatch):
    first = tiny_llama()
    losses = ws.warm_start(first, ArithmeticTask(), steps=3, batch=4, model="tiny")
    saved = list((tmp_path / "cache" / "lm-warmstart").glob("*/adapters.pt"))
    assert len(saved) == 1
    monkeypatch.setattr(ws, "sft", lambda *a, **k: pytest.fail("trained again instead of reading the cache"))
    second = tiny_llama()
    assert ws.warm_start(second, ArithmeticTask(), steps=3, batch=4, model="tiny") == losses
    w1, w2 = first.get_weights(), second.get_weights()
    assert all(torch.equal(w1[n], w2[n]) for n in w1)


def test_other_settings_do_not_read_the_cache():
    ws.warm_start(tiny_llama(), ArithmeticTask(), steps=2, batch=4, model="tiny")
    calls = []
    real = ws.sft
    ws_sft = lambda *a, **k: calls.append(1) or real(*a, **k)
    ws.sft, old = ws_sft, ws.sft
    try:
        ws.warm_start(tiny_llama(), ArithmeticTask(), steps=3, batch=4, model="tiny")
        ws.warm_start(tiny_llama(), ArithmeticTask(digits=1), steps=2, batch=4, model="tiny")
    finally:
        ws.sft = old
    assert len(calls) == 2


@pytest.mark.parametrize("steps", [0, -1, 2.5, True])
def test_bad_steps_are_refused(steps):
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        ws.sft(tiny_llama(), ArithmeticTask(), steps=steps)


def test_a_task_without_worked_answers_is_refused():
    class NoTarget:
        def generate(self, rng):
            raise AssertionError
    with pytest.raises(ValueError, match="no worked answers"):
        ws.sft(tiny_llama(), NoTarget(), steps=1)


def test_runs_of_a_warm_task_start_from_the_same_adapters():
    """warm_policy: whatever the run's seed drew for its fresh adapters, a task with warm_start > 0 replaces them
    with the one cached warm start; a task without one is left alone."""
    import dataclasses

    from toy_rl.lm.run import warm_policy

    @dataclasses.dataclass(frozen=True)
    class WarmAdd(ArithmeticTask):
        warm_start: int = 2

    policies = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        policies.append(warm_policy(tiny_llama(), WarmAdd(), "tiny"))
    a, b = (p.get_weights() for p in policies)
    assert all(torch.equal(a[n], b[n]) for n in a)
    assert any(w.abs().sum() > 0 for n, w in a.items() if "lora_B" in n)        # trained, not the zero init
    torch.manual_seed(0)
    plain = tiny_llama()
    before = plain.get_weights()
    after = warm_policy(plain, ArithmeticTask(), "tiny").get_weights()
    assert all(torch.equal(before[n], after[n]) for n in before)


def test_the_search_warm_task():
    from toy_rl.experiments import make_task, task_label
    from toy_rl.experiments.tasks import task_names
    task = make_task("lm", "search-warm")
    assert task.warm_start == 50 and task_label("lm", task) == "search-warm" and "search-warm" in task_names("lm")
    assert task_label("lm", make_task("lm", "search")) == "search"
    hard = make_task("lm", "search-hard-warm")                 # harder sums, in the protocol's 10-30 % band
    assert (hard.warm_start, hard.max_number) == (50, 30) and task_label("lm", hard) == "search-hard-warm"
    with pytest.raises(ValueError, match="warm_start"):
        make_task("lm", "search", warm_start=-1)


def test_is_cached_after_a_warm_start():
    assert not ws.is_cached(ArithmeticTask(), 2, "tiny", batch=4)
    ws.warm_start(tiny_llama(), ArithmeticTask(), steps=2, batch=4, model="tiny")
    assert ws.is_cached(ArithmeticTask(), 2, "tiny", batch=4)
    assert not ws.is_cached(ArithmeticTask(), 3, "tiny", batch=4)


def test_the_up_front_line_names_the_warm_start(tmp_path):
    """A plan of search-warm runs on SmolLM2 (not trained here) adds the warm start while it is not cached."""
    from toy_rl.experiments.plan import Plan, run_seconds
    from toy_rl.experiments import make_spec
    from toy_rl.lm.warmstart import SECONDS_PER_STEP
    spec = make_spec("lm", "search-warm", rule="bapo", steps=8, out=str(tmp_path), device="cpu")
    plan = Plan(specs=[spec])
    assert "rung-3 LoRA warm start for search-warm (not cached)" in plan.describe()
    assert plan.seconds() == pytest.approx(run_seconds(spec) + 50 * SECONDS_PER_STEP)


def test_the_up_front_line_knows_a_bf16_warm_start_is_cached_apart(tmp_path):
    """bf16 runs start from their own warm start ("smollm2-135m@bfloat16" in its key): the plan of a bf16 run
    finds it in the cache, and a float32 run's plan still says its own is missing."""
    from toy_rl.experiments.plan import Plan, run_seconds
    from toy_rl.experiments import make_spec, make_task
    from toy_rl.lm.run import spec_warm_start_label
    task = make_task("lm", "search-warm")
    folder = ws.cache_dir() / "bf16-warm-start"
    folder.mkdir(parents=True)
    (folder / "adapters.pt").write_bytes(b"")
    (folder / "meta.json").write_text(json.dumps(ws._settings(task, 50, ws.BATCH, ws.LR, 0, "smollm2-135m@bfloat16")))
    bf16, fp32 = (make_spec("lm", "search-warm", rule="bapo", steps=8, out=str(tmp_path), device="cpu", dtype=d)
                  for d in ("bfloat16", "float32"))
    assert (spec_warm_start_label(bf16), spec_warm_start_label(fp32)) == ("smollm2-135m@bfloat16", "smollm2-135m")
    assert "warm start" not in Plan(specs=[bf16]).describe()
    assert "rung-3 LoRA warm start for search-warm (not cached)" in Plan(specs=[fp32]).describe()


def test_the_fingerprint_tells_weights_apart():
    w = tiny_llama().get_weights()
    assert ws.fingerprint(w) == ws.fingerprint({n: t.clone() for n, t in w.items()})
    name = next(iter(w))
    nudged = dict(w, **{name: w[name] + 1e-7 * torch.ones_like(w[name])})
    assert ws.fingerprint(nudged) != ws.fingerprint(w)


def test_a_committed_warm_start_is_read_before_the_cache(tmp_path, monkeypatch):
    """What `toy-rl course collect --warm-starts` commits is what every later run starts from, even where the
    cache holds another warm start of the same settings (one trained on another CPU)."""
    first = tiny_llama()
    ws.warm_start(first, ArithmeticTask(), steps=2, batch=4, model="tiny")
    [committed] = ws.commit()
    assert committed.parent == tmp_path / "committed"
    meta = json.loads((committed / "meta.json").read_text())
    assert meta["fingerprint"] == ws.fingerprint(first.get_weights())
    cached = tmp_path / "cache" / "lm-warmstart" / committed.name / "adapters.pt"    # the cache now differs
    other = {n: t + 1.0 for n, t in first.get_weights().items()}
    ws.save_state(cached, other)
    meta_cached = cached.parent / "meta.json"
    meta_cached.write_text(json.dumps(dict(meta, fingerprint=ws.fingerprint(other))))
    monkeypatch.setattr(ws, "sft", lambda *a, **k: pytest.fail("trained instead of reading the committed copy"))
    second = tiny_llama()
    ws.warm_start(second, ArithmeticTask(), steps=2, batch=4, model="tiny")
    assert ws.fingerprint(second.get_weights()) == meta["fingerprint"]


def test_a_committed_warm_start_is_never_replaced_by_another(tmp_path):
    ws.warm_start(tiny_llama(), ArithmeticTask(), steps=2, batch=4, model="tiny")
    [committed] = ws.commit()
    assert ws.commit() == [committed]                          # the same one again: fine
    [cached] = list((tmp_path / "cache" / "lm-warmstart").iterdir())
    other = {n: t + 1.0 for n, t in tiny_llama().get_weights().items()}
    ws.save_state(cached / "adapters.pt", other)
    meta = json.loads((cached / "meta.json").read_text())
    (cached / "meta.json").write_text(json.dumps(dict(meta, fingerprint=ws.fingerprint(other))))
    before = (committed / "adapters.pt").read_bytes()
    with pytest.raises(ValueError, match="holds another warm start of the same settings"):
        ws.commit()
    assert (committed / "adapters.pt").read_bytes() == before


def test_a_warm_start_that_does_not_match_its_fingerprint_is_refused(tmp_path):
    ws.warm_start(tiny_llama(), ArithmeticTask(), steps=2, batch=4, model="tiny")
    [folder] = list((tmp_path / "cache" / "lm-warmstart").iterdir())
    swapped = {n: torch.zeros_like(t) for n, t in tiny_llama().get_weights().items()}
    ws.save_state(folder / "adapters.pt", swapped)
    with pytest.raises(ValueError, match="not the warm start its meta.json names"):
        ws.warm_start(tiny_llama(), ArithmeticTask(), steps=2, batch=4, model="tiny")
    with pytest.raises(ValueError, match="does not match its meta.json's fingerprint"):
        ws.commit()


def test_is_cached_counts_a_committed_warm_start(tmp_path):
    ws.warm_start(tiny_llama(), ArithmeticTask(), steps=2, batch=4, model="tiny")
    ws.commit()
    import shutil
    shutil.rmtree(tmp_path / "cache" / "lm-warmstart")
    assert ws.is_cached(ArithmeticTask(), 2, "tiny", batch=4)


def test_a_run_records_the_warm_start_it_started_from(tmp_path):
    """The train hook writes what it is given (the dtype and, for a warm task, the fingerprint) into config.json
    once, keeping what the config held."""
    from toy_rl.lm.run import _on_update
    (tmp_path / "config.json").write_text(json.dumps({"rule": "bapo"}))

    class NoGap:
        pass
    hook = _on_update(tmp_path, {"dtype": "bfloat16", "warm_start": "abc"}, NoGap(), None)
    hook({"step": 0}, None, None)
    assert json.loads((tmp_path / "config.json").read_text()) == {"rule": "bapo", "dtype": "bfloat16",
                                                                 "warm_start": "abc"}


def test_runs_from_two_warm_starts_are_not_compared(tmp_path):
    from toy_rl.experiments.logged import check_one_warm_start
    for rule, fp in (("bapo", "aaa"), ("symmetric", "aaa"), ("clip-higher", None)):
        (tmp_path / rule / "seed0").mkdir(parents=True)
        (tmp_path / rule / "seed0" / "config.json").write_text(json.dumps({"rule": rule, "warm_start": fp}))
    assert check_one_warm_start(tmp_path) == "aaa"
    (tmp_path / "clip-higher" / "seed0" / "config.json").write_text(json.dumps({"warm_start": "bbb"}))
    with pytest.raises(ValueError, match="2 different LoRA warm starts: aaa .*bbb"):
        check_one_warm_start(tmp_path)
    from toy_rl.arithmetic.comparison import from_logs
    with pytest.raises(ValueError, match="different LoRA warm starts"):
        from_logs(tmp_path)
