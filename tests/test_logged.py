"""Issue 31: a notebook on a fresh clone opens on the committed logs (results/), says so, and trains by choice."""
from __future__ import annotations

import json
import shutil

import pytest

from toy_rl.course.logs import collect, record_making
from toy_rl.experiments import logged, make_spec, read_dir, run, run_dir, set_train, status, sweep, train_mode


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A repository of its own: tmp/runs and tmp/results, TRAIN unset, the working directory at tmp."""
    monkeypatch.setattr(logged, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(logged, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(logged, "ABOUT", tmp_path / "results" / "about.json")
    monkeypatch.delenv(logged.TRAIN_ENV, raising=False)
    monkeypatch.delenv(logged.LOGGED_ONLY, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _spec(seed=0, out="runs"):
    return make_spec("bandit", "rare-correct", rule="bapo", staleness=2, seed=seed, steps=5, out=out)


def _committed(tree, seeds=(0,)):
    """Runs trained into results/ (as collect would leave them), with their record in about.json."""
    mode = train_mode()
    set_train("missing")
    records = {s: run(_spec(s, out="results")) for s in seeds}
    set_train(mode)
    (tree / "results" / "about.json").write_text(json.dumps(
        {"bandit-rare-correct": {"made": "2026-12-02", "machine": "x86_64 CPU, 2 cores, Linux",
                                 "command": "toy-rl bandit --preset rare-correct"}}))
    return records


def test_twin_maps_runs_to_results_and_nothing_else(tree):
    assert logged.twin("runs/compare/x") == tree.joinpath("results/compare/x").relative_to(tree)
    assert logged.twin(tree / "runs" / "a") == tree / "results" / "a"
    assert logged.twin("elsewhere/a") is None and logged.twin(tree / "results" / "a") is None
    set_train("all")
    assert logged.twin("runs/a") is None


def test_a_run_only_results_holds_is_read_back_and_announced(tree, capsys):
    committed = _committed(tree, seeds=(0, 1))
    capsys.readouterr()
    specs = [_spec(0), _spec(1)]
    assert [status(s) for s in specs] == ["finished", "finished"]
    results = sweep(specs)
    assert next(iter(results.values())) == [committed[0], committed[1]]
    assert not (tree / "runs").exists()                                  # nothing trained, nothing written
    line = capsys.readouterr().out.strip().splitlines()[0]
    for part in ("2 finished runs", "results/bandit-rare-correct", "2026-12-02", "2 cores", "toy-rl bandit", 'TRAIN = "all"'):
        assert part in line, (part, line)
    assert not line.startswith("/") and str(tree) not in line              # a relative path, never this machine's
    assert read_dir(specs[0]) == run_dir(_spec(0, out="results"))


def test_your_own_finished_run_comes_first(tree):
    _committed(tree)
    assert read_dir(_spec(0)).parts[0] == "results"                        # runs/ is empty so far
    shutil.copytree(tree / "results" / "bandit-rare-correct", tree / "runs" / "bandit-rare-correct")
    assert read_dir(_spec(0)).parts[0] == "runs"


def test_train_all_ignores_results_and_trains_into_runs(tree):
    committed = _committed(tree)
    set_train("all")
    assert status(_spec(0)) == "new"
    trained = run(_spec(0))
    assert (run_dir(_spec(0)) / "metrics.jsonl").is_file()
    assert trained[-1]["final"] and len(trained) == len(committed[0])
    assert json.loads((tree / "results" / "about.json").read_text())      # results/ left as it was


def test_train_never_refuses_what_neither_holds(tree):
    set_train("never")
    with pytest.raises(FileNotFoundError, match='TRAIN is "never"'):
        run(_spec(0))
    assert not (tree / "runs").exists()
    _committed(tree)
    assert run(_spec(0))[-1]["final"]                                      # what results/ holds is read


def test_logged_only_reads_results_alone(tree, monkeypatch):
    run(_spec(0))                                                          # your own run, in runs/
    monkeypatch.setenv(logged.LOGGED_ONLY, "1")
    assert train_mode() == "never"
    with pytest.raises(FileNotFoundError, match="results/bandit-rare-correct"):
        run(_spec(0))                                                      # the copies never read runs/


def test_a_bad_train_mode_is_one_clear_error(tree, monkeypatch):
    with pytest.raises(ValueError, match="TRAIN must be one of 'missing', 'all', 'never'; got 'sometimes'"):
        set_train("sometimes")
    monkeypatch.setenv(logged.TRAIN_ENV, "everything")
    with pytest.raises(ValueError, match="got 'everything'"):
        train_mode()


def test_collect_records_when_where_and_how_each_experiment_was_made(tmp_path):
    folder = tmp_path / "runs" / "exp" / "on-policy" / "bapo" / "seed0"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"steps": 1}')
    (folder / "metrics.jsonl").write_text('{"step": 0, "rho": 0.5}\n{"step": 1, "final": true, "accuracy": 0.5}\n')
    collect(tmp_path / "runs", tmp_path / "results", {"exp": "make it"})
    about = json.loads((tmp_path / "results" / "about.json").read_text())
    assert about["exp"]["command"] == "make it" and about["exp"]["made"][:2] == "20" and "cores" in about["exp"]["machine"]
    record_making({}, tmp_path / "results", listed={})                    # an experiment no longer listed goes
    assert json.loads((tmp_path / "results" / "about.json").read_text()) == {}


def test_every_committed_experiment_says_how_it_was_made():
    from toy_rl.course.logs import LOGGED, RESULTS
    about = json.loads((RESULTS / "about.json").read_text())
    assert set(about) == set(LOGGED)
    assert all(about[name]["command"] == how and about[name]["made"] and about[name]["machine"]
               for name, how in LOGGED.items())


def test_the_train_flag_sets_what_may_train(tree):
    from toy_rl.cli import build_parser, main
    from toy_rl.commands.common import settle
    args = build_parser().parse_args(["arithmetic", "--train", "never"])
    settle(args)
    assert train_mode() == "never"
    assert main(["bandit", "--train", "sometimes"]) == 2                   # argparse names the choices


def test_collect_leaves_stored_batches_out_where_asked(tmp_path, monkeypatch):
    import torch

    from toy_rl.course import logs
    for name in ("slim", "full"):
        folder = tmp_path / "runs" / name / "on-policy" / "bapo" / "seed0"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text('{"steps": 1}')
        (folder / "metrics.jsonl").write_text('{"step": 0, "rho": 0.5}\n{"step": 1, "final": true, "accuracy": 0.5}\n')
        torch.save({0: {"logp": torch.zeros(1, 2), "old_logp": torch.zeros(1, 2), "advantages": torch.ones(1),
                        "mask": torch.ones(1, 2)}}, folder / "batches.pt")
    monkeypatch.setattr(logs, "NO_BATCHES", {"slim"})
    collect(tmp_path / "runs", tmp_path / "results", {"slim": "a", "full": "b"})
    kept = {p.relative_to(tmp_path / "results").parts[0] for p in (tmp_path / "results").rglob("batches.pt")}
    assert kept == {"full"}
