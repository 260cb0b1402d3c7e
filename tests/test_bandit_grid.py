"""Rung 1's robustness grid (toy_rl.bandit.grid): one verdict across step sizes and task instances, cells written
as they finish and read back, and the command."""
import json

import pytest

from toy_rl.bandit.grid import across, format_grid, grid_verdicts, load_grid, run_grid


def test_across_is_supported_only_where_every_cell_supports():
    assert across(["supported"] * 9) == "supported"
    assert across(["supported"] * 8 + ["inconclusive"]) == "partly supported: in 8 of 9 grid cells, inconclusive in the rest"
    assert across(["supported", "contradicted", "inconclusive"]).startswith("not robust: for it in 1 of 3")
    assert across(["contradicted", "inconclusive"]).startswith("contradicted in 1 of 2")
    assert across(["not testable: why"] * 2) == "not testable"
    assert across(["inconclusive", "not testable: why"]) == "inconclusive"


def test_grid_cells_are_written_read_back_and_judged(tmp_path):
    kw = dict(seeds=range(3), factors=(0.5, 2.0), task_seeds=(0, 1), steps=30, out=tmp_path, cells=(("reuse", 2),))
    grid = run_grid("long-failures", **kw)
    assert set(grid) == {(0.5, 0), (0.5, 1), (2.0, 0), (2.0, 1)}
    files = sorted(tmp_path.rglob("rows.json"))
    assert [p.parent.name for p in files] == ["eta0.5-task0", "eta0.5-task1", "eta2-task0", "eta2-task1"]
    stamps = [p.stat().st_mtime_ns for p in files]
    assert run_grid("long-failures", **kw) == grid and [p.stat().st_mtime_ns for p in files] == stamps
    assert load_grid(tmp_path, "long-failures") == grid
    json.loads(files[0].read_text(), parse_constant=lambda c: pytest.fail(f"{c} in strict JSON"))
    verdicts = grid_verdicts(grid)
    assert set(verdicts) == {5, 6} and set(verdicts[5]["cells"]) == set(grid)
    # a faster step changes the runs (the grid is not one comparison four times)
    assert verdicts[5]["primary"][0.5, 0] != verdicts[5]["primary"][2.0, 0]
    text = format_grid(grid)
    assert "η × 0.5: task 0:" in text and "η × 2: task 0:" in text


def test_command_runs_the_grid_and_refuses_what_it_varies(tmp_path, capsys):
    from toy_rl.cli import main
    assert main(["bandit", "--compare", "--grid", str(tmp_path), "--seeds", "2", "--steps", "12", "--mode", "lag",
                 "--staleness", "2", "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["verdicts"]["5"]["cells"]) == {f"eta{f}-task{t}" for f in ("0.5", "1", "2") for t in (0, 1, 2)}
    assert main(["bandit", "--compare", "--grid", str(tmp_path), "--lr", "2"]) == 2
    assert "--lr does not apply to --grid" in capsys.readouterr().err
    assert main(["bandit", "--grid", str(tmp_path)]) == 2
