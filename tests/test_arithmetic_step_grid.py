"""Rung 2's step-size grid (toy_rl.arithmetic.step_grid): the comparison at lr × 0.5, 1, 2, read back from the logs
committed in results/compare, and run by `toy-rl arithmetic --compare --grid`."""
import json
import shutil
from pathlib import Path

import pytest

from toy_rl.arithmetic.comparison import from_logs
from toy_rl.arithmetic.presets import at_step, get_preset, with_lr
from toy_rl.arithmetic.step_grid import (GRID_RULES, STEP_FACTORS, format_step_grid, load_step_grid, step_command,
                                         step_grid_verdicts, step_grid_view)

RESULTS = Path(__file__).resolve().parents[1] / "results" / "compare"


def test_a_step_size_is_its_own_preset_and_the_presets_own_step_is_the_preset():
    base = get_preset("long-failures")
    assert at_step(base, 1) is base and with_lr(base, base.rl_config().lr) is base
    assert at_step(base, 0.5).name == "long-failures-lr0.00025" and at_step(base, 0.5).rl_config().lr == 0.00025
    assert at_step(get_preset("long-failures"), 2).name == "long-failures-lr0.001"
    for bad in (0, -1, float("nan"), "2"):
        with pytest.raises(ValueError, match="positive"):
            at_step(base, bad)


def test_the_committed_grid_reads_back_with_every_rule_at_every_step():
    grid = load_step_grid(RESULTS)
    assert sorted(grid) == list(STEP_FACTORS)
    for factor, result in grid.items():
        rules = {r["rule"] for r in result["rows"]}
        assert set(GRID_RULES) <= rules, (factor, rules)
        assert result["seeds"] == list(range(10)) and result["scenario"] == "lag-8"
        assert result["lr"] == pytest.approx(5e-4 * factor)
        assert result["gate"]["regime"] == "negatives-dominate"
    assert len(grid[1.0]["rows"]) == 9 and len(grid[0.5]["rows"]) == 4        # the controls at the preset's step
    verdicts = step_grid_verdicts(grid)
    assert set(verdicts) == {5, 6} and all(set(v["cells"]) == set(STEP_FACTORS) for v in verdicts.values())
    text = format_step_grid(grid)
    assert "lr 0.00025 (× 0.5)" in text and "lr 0.001 (× 2)" in text
    assert max(len(line) for line in text.splitlines()) < 400
    fig, drawn = step_grid_view(grid)
    assert set(drawn) == set(GRID_RULES) and all(len(points) == 3 for points in drawn.values())


def test_a_missing_step_size_names_the_command_that_logs_it(tmp_path):
    shutil.copytree(RESULTS / "long-failures-lr0.00025", tmp_path / "long-failures-lr0.00025")
    with pytest.raises(FileNotFoundError, match="--lr 0.001 --rule symmetric clip-higher bapo"):
        load_step_grid(tmp_path, factors=(0.5, 2.0))
    assert step_command("long-failures", 1) == "toy-rl arithmetic --compare long-failures --seeds 10 --workers 2"
    with pytest.raises(ValueError, match="unknown preset"):
        load_step_grid(tmp_path, preset="no-such")


def test_logs_of_two_comparisons_in_one_folder_are_refused(tmp_path):
    folder = tmp_path / "mixed"
    source = RESULTS / "long-failures-lr0.00025" / "lag-8"
    shutil.copytree(source / "bapo", folder / "lag-8" / "bapo")
    shutil.copytree(source / "symmetric", folder / "lag-4" / "symmetric")
    with pytest.raises(ValueError, match="one scenario"):
        from_logs(folder)
    with pytest.raises(FileNotFoundError):
        from_logs(tmp_path / "none")


def test_the_command_runs_the_grid_and_refuses_what_it_fixes(tmp_path, monkeypatch, capsys):
    from toy_rl.cli import main
    monkeypatch.setenv("TOY_RL_CACHE", str(tmp_path / "cache"))
    assert main(["arithmetic", "--compare", "--grid", "--smoke", "--seeds", "2", "--out", str(tmp_path), "--json",
                 "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sorted(out["cells"]) == ["0.5", "1", "2"]
    assert {r["rule"] for r in out["cells"]["2"]["rows"]} == set(GRID_RULES)
    assert set(out["verdicts"]) == {"5", "6"}
    assert (tmp_path / "compare" / "long-failures-smoke-lr0.001" / "lag-8" / "bapo" / "seed1" / "metrics.jsonl").exists()
    for argv in (["--lr", "0.1"], ["--rule", "bapo"]):
        assert main(["arithmetic", "--compare", "--grid", "--smoke", "--out", str(tmp_path), *argv]) == 2
        assert "--grid fixes the step sizes" in capsys.readouterr().err
    assert main(["arithmetic", "--grid", "--smoke", "--out", str(tmp_path)]) == 2
    assert "--grid applies to --compare only" in capsys.readouterr().err
