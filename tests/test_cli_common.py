"""The flags every `toy-rl` command shares (toy_rl/commands/common.py) and the one-line errors of toy_rl/cli.py.

Nothing here trains: the functions that do the work are replaced by ones that fail the test if called, so a bad
input that is not caught up front fails fast instead of running."""
import json
import sys

import pytest
import torch

from toy_rl.cli import build_parser, main

RULES = ["symmetric", "clip-higher", "bapo"]

# The common flags each command must offer (the spec of issue 10): --json and --no-progress everywhere;
# --smoke wherever something trains (tour and estimate train nothing); --threads and --device where the
# command runs torch models of its own choosing (the bandit, entropy-rule, figures and report run on one
# thread inside their library functions).
COMMON = {
    "tour": {"--seed", "--out", "--json", "--no-progress"},
    "entropy-rule": {"--seed", "--smoke", "--json", "--no-progress"},
    "bandit": {"--rule", "--seeds", "--first-seed", "--steps", "--group-size", "--out", "--json", "--no-progress",
               "--smoke", "--train"},
    "warmstart": {"--seed", "--steps", "--out", "--threads", "--device", "--json", "--no-progress", "--smoke"},
    "arithmetic": {"--rule", "--seeds", "--first-seed", "--steps", "--group-size", "--threads", "--device", "--out",
                   "--json", "--no-progress", "--smoke", "--train"},
    "lora": {"--rule", "--seeds", "--first-seed", "--steps", "--group-size", "--threads", "--device", "--out",
             "--json", "--no-progress", "--smoke", "--train"},
    "estimate": {"--group-size", "--json", "--no-progress"},
    "figures": {"--out", "--json", "--no-progress", "--smoke", "--train"},
    "report": {"--seeds", "--steps", "--out", "--json", "--no-progress", "--smoke"},
    "pilot": {"--seeds", "--first-seed", "--steps", "--threads", "--out", "--json", "--no-progress", "--smoke",
              "--train"},
    "course": {"--json"},
}


def _subparsers():
    return build_parser()._subparsers._group_actions[0].choices


def _parse(*argv):
    from toy_rl.commands.common import settle
    args = build_parser().parse_args(list(argv))
    settle(args)
    return args


def _common_group(parser):
    group = next(g for g in parser._action_groups if g.title.startswith("common options"))
    return {s for a in group._group_actions if a.help != "==SUPPRESS==" for s in a.option_strings}


@pytest.fixture
def no_work(monkeypatch):
    """Every function that trains, loads a model or draws is replaced by one that fails the test."""
    import toy_rl.arithmetic.warmstart
    import toy_rl.commands.arithmetic
    import toy_rl.commands.bandit
    import toy_rl.commands.entropy_rule
    import toy_rl.commands.tour
    import toy_rl.experiments
    import toy_rl.lm.run
    import toy_rl.report
    import toy_rl.report.figures

    def must_not_run(*args, **kwargs):
        raise AssertionError("bad input should have stopped the command before any work")
    for module, name in [(toy_rl.commands.tour, "run_tour"), (toy_rl.commands.bandit, "sweep"),
                         (toy_rl.commands.arithmetic, "sweep"), (toy_rl.commands.arithmetic, "entropy_check"),
                         (toy_rl.commands.entropy_rule, "verify"), (toy_rl.arithmetic.warmstart, "ensure_warmstart"),
                         (toy_rl.lm.run, "baseline"), (toy_rl.experiments, "sweep"),
                         (toy_rl.report.figures, "render_figures"), (toy_rl.report, "build_report")]:
        monkeypatch.setattr(module, name, must_not_run)


def _one_line_error(capsys, command):
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"toy-rl {command}: error: "), err
    assert "Traceback" not in err
    return err


# --- help -------------------------------------------------------------------------------------------------------

def test_every_command_lists_its_common_flags():
    parsers = _subparsers()
    assert set(parsers) == set(COMMON)
    for name, flags in COMMON.items():
        text = parsers[name].format_help()
        assert _common_group(parsers[name]) == flags, name
        for flag in flags:
            assert flag in text, (name, flag)


def test_help_shows_percent_signs_once(capsys):
    assert main(["--help"]) == 0
    texts = [capsys.readouterr().out] + [p.format_help() for p in _subparsers().values()]
    assert all("%%" not in t for t in texts)
    assert "95% bands" in _subparsers()["bandit"].format_help()


def test_one_default_everywhere():
    for name in ("warmstart", "arithmetic", "lora"):
        assert _parse(name).threads == 1
    for name in ("bandit", "arithmetic", "lora"):
        assert _parse(name).rule == RULES                          # "all", expanded, lora included
        assert _parse(name, "--rule", "bapo", "all").rule == ["bapo", "symmetric", "clip-higher"]
    for name in ("bandit", "arithmetic", "lora"):
        args = _parse(name, "--seeds", "3", "--first-seed", "5")
        assert (args.seeds, args.first_seed) == (3, 5)
    for name in ("tour", "entropy-rule", "warmstart"):
        assert _parse(name, "--seed", "7").seed == 7


def test_smoke_shrinks_defaults_but_a_given_flag_wins():
    full, smoke = _parse("bandit"), _parse("bandit", "--smoke")
    assert smoke.seeds < full.seeds and smoke.steps < full.steps
    assert _parse("bandit", "--smoke", "--seeds", "7").seeds == 7
    assert _parse("entropy-rule", "--smoke").instances < _parse("entropy-rule").instances
    assert _parse("lora", "--smoke", "--eval-size", "5").eval_size == 5


def test_arithmetic_smoke_runs_are_small_and_in_their_own_folder(monkeypatch, tmp_path, capsys):
    import toy_rl.commands.arithmetic as command
    from toy_rl.experiments import run_dir
    calls = []
    monkeypatch.setattr(command, "sweep", lambda specs: calls.append(specs) or {})
    assert main(["arithmetic", "--smoke", "--out", str(tmp_path)]) == 0
    assert len(calls[-1]) == 3 * _parse("arithmetic", "--smoke").seeds            # every rule, the smoke seeds
    assert all(s.smoke and "-smoke" in str(run_dir(s)) and s.rl.steps < _parse("arithmetic").steps
               for s in calls[-1])                                                 # never mixed with full runs
    assert main(["arithmetic", "--smoke", "--group-size", "6", "--out", str(tmp_path)]) == 0
    assert {s.rl.group_size for s in calls[-1]} == {6}                            # a given flag wins


def test_old_names_still_work_but_are_hidden():
    assert _parse("bandit", "--group", "4").group_size == 4
    assert _parse("warmstart", "--max-steps", "9").steps == 9
    assert str(_parse("warmstart", "--cache-dir", "/tmp/c").out) == "/tmp/c"
    assert "[--group " not in _subparsers()["bandit"].format_usage()
    assert "[--cache-dir " not in _subparsers()["warmstart"].format_usage()
    assert "[--max-steps " not in _subparsers()["warmstart"].format_usage()


# --- bad input: one line, exit 2, nothing written ---------------------------------------------------------------

BAD_VALUES = [
    (["arithmetic", "--threads", "0"], "--threads must be >= 1"),
    (["lora", "--threads", "0"], "--threads must be >= 1"),
    (["warmstart", "--threads", "-2"], "--threads must be >= 1"),
    (["arithmetic", "--lr", "inf"], "--lr must be a finite number"),
    (["bandit", "--lr", "nan"], "--lr must be a finite number"),
    (["lora", "--lr", "inf"], "--lr must be a finite number"),
    (["lora", "--lr", "0"], "--lr must be a finite number > 0"),
    (["arithmetic", "--seeds", "0"], "--seeds must be >= 1"),
    (["report", "--rung", "1", "--seeds", "0"], "--seeds must be >= 1"),
    (["bandit", "--steps", "x"], "--steps must be an integer >= 1; got 'x'"),
    (["arithmetic", "--first-seed", "-1"], "--first-seed must be >= 0"),
    (["arithmetic", "--group-size", "1"], "--group-size must be >= 2"),
    (["bandit", "--group", "1"], "--group must be >= 2"),
    (["lora", "--rule", "ppo"], "--rule: unknown rule 'ppo'"),
    (["arithmetic", "--rule", "all", "ppo"], "--rule: unknown rule 'ppo'"),
    (["warmstart", "--target-accuracy", "1.5"], "--target-accuracy must be a probability"),
    (["warmstart", "--device", "gpu"], "--device must be auto, cpu or cuda"),
    (["estimate", "--gpu-gib", "-1"], "--gpu-gib must be a finite number > 0"),
    (["tour", "--drift", "0", "-1"], "--drift must be a finite number >= 0"),
    (["entropy-rule", "--instances", "0"], "--instances must be >= 1"),
    (["report", "--rung", "5"], "--rung: invalid choice: 5"),
    (["lora", "--staleness", "2", "--partial", "4"], "--partial is its own kind of staleness"),
    (["arithmetic", "--task", "division"], "unknown task"),
]


@pytest.mark.parametrize("argv, message", BAD_VALUES)
def test_bad_value_is_one_line_and_writes_nothing(argv, message, tmp_path, capsys, no_work):
    out = tmp_path / "out"
    with_out = argv + ["--out", str(out)] if argv[0] not in ("entropy-rule", "estimate") else argv
    assert main(with_out) == 2
    assert message in _one_line_error(capsys, argv[0])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["tour"], ["bandit"], ["arithmetic"], ["warmstart"], ["lora"], ["figures", "--smoke"],
                                  ["report", "--rung", "1", "--smoke"]])
def test_unwritable_out_fails_before_any_work(argv, tmp_path, capsys, no_work):
    blocker = tmp_path / "a-file"               # a path under a regular file: unwritable even for root
    blocker.write_text("")
    assert main(argv + ["--out", str(blocker / "sub" / "x")]) == 2
    assert "--out: cannot create the folder" in _one_line_error(capsys, argv[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


@pytest.mark.parametrize("argv", [["figures", "--runs"], ["report", "--rung", "2", "--runs"]])
def test_unwritable_runs_folder_fails_before_any_work(argv, tmp_path, capsys, no_work):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(argv + [str(blocker / "runs"), "--out", str(tmp_path / "out")]) == 2
    assert "--runs: cannot create the folder" in _one_line_error(capsys, argv[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_out_that_is_a_file_where_a_folder_is_meant(tmp_path, capsys, no_work):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["tour", "--out", str(blocker)]) == 2
    assert "is a file, not a folder" in _one_line_error(capsys, "tour")


@pytest.mark.parametrize("command", ["arithmetic", "lora", "warmstart"])
def test_cuda_without_cuda_is_one_line(command, monkeypatch, tmp_path, capsys, no_work):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main([command, "--device", "cuda", "--out", str(tmp_path / "out")]) == 2
    assert "sees no GPU" in _one_line_error(capsys, command)
    assert list(tmp_path.iterdir()) == []


def test_missing_task_file_is_one_line(tmp_path, capsys, no_work):
    assert main(["lora", "--task", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "out")]) == 2
    assert "missing.jsonl" in _one_line_error(capsys, "lora")
    assert list(tmp_path.iterdir()) == []


def test_missing_llm_extra_names_the_install_command(monkeypatch, capsys):
    for module in ("transformers", "peft"):
        monkeypatch.setitem(sys.modules, module, None)        # as if the llm extra were not installed
    assert main(["estimate", "--preset", "smollm2-135m", "--dry-run"]) == 2
    assert "bash scripts/setup.sh dev,llm" in _one_line_error(capsys, "estimate")


def test_bugs_keep_their_traceback(monkeypatch, tmp_path):
    import toy_rl.commands.tour as tour

    def bug(*args, **kwargs):
        raise RuntimeError("a bug")
    monkeypatch.setattr(tour, "run_tour", bug)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["tour", "--out", str(tmp_path)])

    def wrong_import(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'toy_rl.nope'", name="toy_rl.nope")
    monkeypatch.setattr(tour, "run_tour", wrong_import)
    with pytest.raises(ModuleNotFoundError):
        main(["tour", "--out", str(tmp_path)])


# --- Ctrl-C ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command, module, name, says", [
    ("tour", "toy_rl.commands.tour", "run_tour", "start again"),
    ("arithmetic", "toy_rl.commands.arithmetic", "sweep", "resume"),
])
def test_ctrl_c_is_one_line_and_exit_130(command, module, name, says, monkeypatch, tmp_path, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(sys.modules[module], name, interrupted)
    assert main([command, "--out", str(tmp_path)]) == 130
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith(f"toy-rl {command}: interrupted; rerun the same command")
    assert says in err and "Traceback" not in err


# --- --json is strict JSON ----------------------------------------------------------------------------------------

def _strict(text: str):
    """json.loads that rejects NaN and Infinity (Python's json.loads accepts them by default)."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def test_arithmetic_json_with_one_seed_is_strict(monkeypatch, tmp_path, capsys):
    import toy_rl.commands.arithmetic as command
    nan, inf = float("nan"), float("inf")
    monkeypatch.setattr(command, "sweep", lambda specs: {})
    monkeypatch.setattr(command, "summarize", lambda results: [                # as a one-seed summary may be
        {"rule": "bapo", "seeds": 1, "final_accuracy": 0.6, "final_accuracy_lo": nan, "final_accuracy_hi": nan,
         "p_vs_symmetric": nan, "grad_norm": inf}])
    assert main(["arithmetic", "--seeds", "1", "--json", "--out", str(tmp_path)]) == 0
    (row,) = _strict(capsys.readouterr().out)
    assert row["final_accuracy"] == 0.6 and row["seeds"] == 1
    assert row["final_accuracy_lo"] is row["final_accuracy_hi"] is row["p_vs_symmetric"] is row["grad_norm"] is None


def test_bandit_json_with_one_seed_is_strict(tmp_path, capsys):
    assert main(["bandit", "--rule", "symmetric", "bapo", "--staleness", "0", "--seeds", "1", "--steps", "4",
                 "--tokens", "8", "--json", "--out", str(tmp_path / "c.jsonl")]) == 0
    summary = _strict(capsys.readouterr().out)
    assert summary["seeds"] == 1 and summary["rules"] == ["symmetric", "bapo"]
    assert all(r["final_reward_lo"] is None for r in summary["rows"])
    assert summary == _strict((tmp_path / "c.summary.json").read_text())


def test_report_and_warmstart_have_json(monkeypatch, tmp_path, capsys):
    import toy_rl.arithmetic.warmstart as warmstart
    import toy_rl.report
    from toy_rl.report.rungs import Report, Table
    fake = Report(rung=1, title="t", lead="l", facts=[("seeds", "1")], figures=[],
                  table=Table(headers=["rule", "R"], rows=[["bapo", "n/a"]]), verdicts=["v"])
    monkeypatch.setattr(toy_rl.report, "build_report", lambda *a, **k: fake)
    assert main(["report", "--rung", "1", "--json", "--out", str(tmp_path / "r.md")]) == 0
    d = _strict(capsys.readouterr().out)
    assert d["files"] == [str(tmp_path / "r.md")] and d["facts"] == {"seeds": "1"} and d["verdicts"] == ["v"]

    ckpt = tmp_path / "add.pt"
    monkeypatch.setattr(warmstart, "ensure_warmstart", lambda *a, **k: ckpt)
    import toy_rl.arithmetic.model as model
    monkeypatch.setattr(model, "read_meta", lambda path: dict(heldout_acc_greedy=float("nan"), heldout_acc_sampled=0.5,
                                                              heldout_problems=16, steps=3, seconds=1.0, params=10))
    assert main(["warmstart", "--json", "--out", str(tmp_path / "cache")]) == 0
    (entry,) = _strict(capsys.readouterr().out)
    assert entry["task"] == "add" and entry["path"] == str(ckpt) and entry["heldout_acc_greedy"] is None


@pytest.mark.parametrize("command", sorted(c for c, flags in COMMON.items() if {"--smoke", "--steps"} <= flags))
def test_smoke_treats_steps_the_same_on_every_command(command, no_work, capsys):
    """Issue 30: `arithmetic --smoke --steps 120` silently ran 6 updates, `bandit --smoke --steps 150` ran 150. Now
    every command honours --steps up to its smoke size and refuses a larger one by name."""
    if command == "report":                               # its smoke size is per rung, checked in its run()
        from toy_rl.commands.report import smoke_steps_of
        most, extra = smoke_steps_of(1), ["--rung", "1"]
    else:
        most, extra = _parse(command, "--smoke")._smoke.get("steps"), []
    if most is None:
        pytest.skip(f"{command} has no smoke size for --steps")
    assert _parse(command, *extra, "--smoke", "--steps", str(most)).steps == most
    assert main([command, *extra, "--smoke", "--steps", str(most + 1)]) == 2
    _one_line_error(capsys, command)
