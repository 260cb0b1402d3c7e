"""No long surprise (issue 13): work that trains for more than ~30 s says so first, in one line with its estimate;
`toy-rl figures` does not overwrite the committed figures unless asked; a missing extra is one line."""
import json
import sys
from pathlib import Path

import pytest

from toy_rl import eta, timing
from toy_rl.arithmetic import backend as arithmetic, warmstart as arithmetic_warmstart
from toy_rl.bandit import backend as bandit
from toy_rl.cli import main
from toy_rl.experiments.plan import Plan, run_seconds
from toy_rl.lm import backend as lm

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def always(monkeypatch):
    """Announce everything (the smoke work of these tests is far below the real threshold)."""
    monkeypatch.setattr(timing, "THRESHOLD", -1.0)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOY_RL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_durations_read_as_a_person_would_say_them():
    assert timing.duration(41) == "about 40 s"
    assert timing.duration(6 * 60 + 10) == "about 6 min"
    assert timing.duration(70 * 60) == "about 1 h 10 min"
    assert timing.duration(2 * 3600) == "about 2 h"


def test_every_rate_says_how_it_was_measured():
    for rate in [*arithmetic.RL_RATES.values(), *lm.RL_RATES.values(), *lm.BF16_RL_RATES.values(),
                 *arithmetic_warmstart.RATES.values(), bandit.COMPARE_RATE]:
        assert rate.seconds > 0 and rate.batch > 0 and len(rate.measured) > 20


def test_short_work_is_not_announced_and_quiet_silences(capsys):
    assert not timing.announce("training a little", 5.0)
    assert timing.announce("training a lot", 400.0)
    with timing.quiet():
        assert not timing.announce("training a lot", 400.0)
    assert capsys.readouterr().err == "training a lot: about 7 min on 2 CPU cores\n"


def test_a_fresh_default_warm_start_is_estimated_from_its_measured_rate(cache):
    from toy_rl.arithmetic.warmstart import default_config, smoke_config
    seconds = arithmetic_warmstart.estimated_seconds("add")
    rate = arithmetic_warmstart.RATES["add"]
    assert seconds == pytest.approx(default_config("add").max_steps * rate.seconds
                                    + arithmetic_warmstart.HELDOUT_SECONDS["add"])
    assert seconds > timing.THRESHOLD                           # a fresh clone hears about it
    assert arithmetic_warmstart.estimated_seconds("add", smoke_config("add")) < 1


def test_ensure_warmstart_says_what_it_trains_before_it_does(cache, always, capsys):
    from toy_rl.arithmetic.warmstart import ensure_warmstart, smoke_config
    ensure_warmstart("add", smoke_config("add"), progress=False, device="cpu")
    err = capsys.readouterr().err
    assert err.startswith(f"training the rung-2 warm start for task add (not cached in {cache / 'warmstart'}): up to "
                          "about ") and err.endswith(" on 2 CPU cores\n")
    ensure_warmstart("add", smoke_config("add"), progress=False, device="cpu")        # cached now: silent
    assert capsys.readouterr().err == ""


def test_a_sweep_announces_its_missing_runs_once_then_reads_them_back(tmp_path, cache, always, capsys):
    from toy_rl.experiments import grid, sweep
    specs = grid("arithmetic", "add", ("symmetric", "bapo"), (0, 2), range(1), smoke=True, out=tmp_path / "runs",
                 progress=False, device="cpu")
    sweep(specs)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines                # one line: the runs and the warm start they need, nothing more
    assert lines[0].startswith(f"training 4 rung-2 runs not found under {tmp_path / 'runs' / 'arithmetic-add-smoke'} "
                               "(6 updates each) and the rung-2 warm start for add (not cached): about ")
    sweep(specs)
    assert capsys.readouterr().err == ""


def test_the_default_comparison_on_a_fresh_clone_is_announced_with_its_length(tmp_path, cache):
    from toy_rl.arithmetic.presets import DEFAULT, get_preset
    from toy_rl.report.runs import arithmetic_comparison_plan
    plan = arithmetic_comparison_plan(tmp_path / "runs")
    assert len(plan.specs) == 90                 # 8 rules + the fixed rule at BAPO's mean bounds, 10 seeds
    preset = get_preset(DEFAULT)
    rate = arithmetic.RL_RATES[("search", False)]
    runs = 90 * preset.rl["steps"] * rate.seconds
    warm = arithmetic_warmstart.estimated_seconds(preset.make_task(), preset.warmstart)
    assert plan.seconds() == pytest.approx(runs + warm)
    line = plan.describe()
    assert line.startswith(f"training 90 rung-2 runs not found under {tmp_path / 'runs' / 'compare' / DEFAULT} "
                           f"({preset.rl['steps']} updates each) and the rung-2 warm start for search (not cached)")


def test_a_bf16_rung3_run_is_estimated_from_its_own_rate(tmp_path):
    """The rung-3 comparison in bf16 (issue 26) was announced at the float32 rate: 19 h 30 min instead of ~12 h."""
    from toy_rl.experiments import make_spec
    spec = lambda dtype: make_spec("lm", "search-hard-warm", rule="bapo", steps=40, staleness=2, out=str(tmp_path),
                                   device="cpu", dtype=dtype)
    bf16, fp32 = lm.BF16_RL_RATES["search-hard-warm"], lm.RL_RATES["search-hard-warm"]
    assert run_seconds(spec("bfloat16")) == pytest.approx(40 * bf16.seconds)
    assert run_seconds(spec("float32")) == pytest.approx(40 * fp32.seconds)
    assert bf16.seconds < fp32.seconds


def test_the_partial_rollout_comparison_is_estimated_from_its_own_rate(tmp_path, cache):
    from toy_rl.arithmetic.comparison import missing_specs
    from toy_rl.arithmetic.presets import get_preset
    preset = get_preset("long-failures-partial")
    specs = missing_specs(preset, range(10), tmp_path / "runs" / "compare")
    assert len(specs) == 40                      # 3 rules, and BAPO's 10 again for the fixed rule at its mean bounds
    rate = arithmetic.RL_RATES[("search", True)]
    assert rate.seconds < arithmetic.RL_RATES[("search", False)].seconds
    plan = Plan(specs=specs, workers=2)
    warm = arithmetic_warmstart.estimated_seconds(preset.make_task(), preset.warmstart)
    assert plan.seconds() == pytest.approx(40 * preset.rl["steps"] * rate.seconds / 2 + warm)
    assert plan.describe().startswith(f"training 40 rung-2 runs not found under "
                                      f"{tmp_path / 'runs' / 'compare' / preset.name} (120 updates each, 2 at once)")


def test_the_old_eta_module_still_answers_with_the_moved_names():
    """toy_rl.eta is toy_rl.timing's old name, kept for one round: its names, and the rates keyed by rung."""
    assert eta.Plan is Plan and eta.up_front is timing.up_front and eta.announce is timing.announce
    assert eta.RL_RATES[("arithmetic", "search", True)] is arithmetic.RL_RATES[("search", True)]
    assert eta.RL_RATES[("lm", "add", False)] is lm.RL_RATES["add"]
    assert eta.BF16_RL_RATES[("lm", "search-hard-warm")] is lm.BF16_RL_RATES["search-hard-warm"]
    assert eta.bandit_seconds(20, 300) == bandit.comparison_seconds(20, 300) == bandit.COMPARE_RATE.seconds
    assert eta.warmstart_seconds("add") == arithmetic_warmstart.estimated_seconds("add")


def test_figures_announce_their_whole_plan_in_one_line(tmp_path, cache, always, capsys):
    from toy_rl.report.figures import render_figures
    render_figures(["02", "04"], tmp_path / "figs", smoke=True, runs=tmp_path / "runs", progress=False)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("training 18 rung-2 runs not found under") and "rung 1's comparison" in lines[0]


def test_figures_refuse_to_overwrite_the_committed_ones_without_the_flag(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    committed = tmp_path / "docs" / "figures"
    committed.mkdir(parents=True)
    (committed / "00-clipping.png").write_bytes(b"committed")
    assert main(["figures", "--only", "00"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "pass --overwrite" in err and "--out DIR" in err
    assert (committed / "00-clipping.png").read_bytes() == b"committed"
    assert main(["figures", "--only", "00", "--overwrite", "--json"]) == 0
    assert (committed / "00-clipping.png").read_bytes()[:4] == b"\x89PNG"
    entry = json.loads(capsys.readouterr().out)[0]
    assert entry["command"] == "toy-rl figures --only 00-clipping --overwrite"


def test_nothing_tells_to_run_figures_into_docs_figures_without_the_flag():
    """Every `toy-rl figures ...` command the docs and scripts show names --out, --smoke or --overwrite (the bare
    name alone is a mention, not a command)."""
    import re
    texts = [ROOT / "README.md", ROOT / "notebooks" / "README.md", ROOT / "docs" / "figures" / "README.md",
             *(p for p in (ROOT / "scripts").glob("*") if p.is_file()), ROOT / ".ci" / "run"]
    for path in texts:
        for command in re.findall(r"toy-rl figures\b[^`\n]*", path.read_text()):
            args = command.removeprefix("toy-rl figures").strip()
            if args and not args.startswith(("and ", "(", ")", ",", ".")):
                assert re.search(r"--(out|smoke|overwrite|help)\b", args), f"{path.name}: {command}"
    captions = json.loads((ROOT / "docs" / "figures" / "captions.json").read_text())
    assert all(e["command"].endswith("--overwrite") for e in captions.values())


def test_estimate_dry_run_without_the_llm_extra_is_one_line(monkeypatch, capsys):
    for name in ("transformers", "peft", "gguf", "accelerate"):
        monkeypatch.setitem(sys.modules, name, None)          # as if the llm extra were not installed
    assert main(["estimate", "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("toy-rl estimate: error: this needs the llm extra") and "scripts/setup.sh" in err
