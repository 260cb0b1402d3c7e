"""The executed notebooks in docs/course/ are made from the committed logs in results/ and stay current.

The last test executes every notebook again from those logs (nothing trains) and fails on any output that no
longer matches its committed copy: rebuild with `toy-rl course build`.
"""
import base64
import io
import json
import shutil

import nbformat
import numpy as np
import pytest
import torch
from PIL import Image

from toy_rl.course import COURSE, NOTEBOOKS, RESULTS, check, collect
from toy_rl.course.execute import notebooks
from toy_rl.course.logs import KEPT, LOGGED, WARM_STARTS, size
from toy_rl.course.outputs import LIVE, clean, compare, image_rms, normalise, palette_png
from toy_rl.experiments import make_spec, run
from toy_rl.experiments.runner import LOGGED_ONLY

COPIES = sorted(COURSE.glob("*.ipynb"))


def _png(value: int, size=(40, 30)) -> str:
    buf = io.BytesIO()
    Image.fromarray(np.full((size[1], size[0], 3), value, dtype=np.uint8)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _executed(*outputs_per_cell, sources=None):
    cells = []
    for i, outputs in enumerate(outputs_per_cell):
        cell = nbformat.v4.new_code_cell(sources[i] if sources else f"x = {i}")
        cell.outputs = [nbformat.from_dict(o) for o in outputs]
        cells.append(cell)
    return nbformat.v4.new_notebook(cells=cells)


def _stdout(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def _image(png):
    return {"output_type": "display_data", "metadata": {}, "data": {"image/png": png, "text/plain": "<Figure>"}}


def test_nothing_trains_with_logged_only(tmp_path, monkeypatch):
    spec = make_spec("arithmetic", "add", rule="symmetric", staleness=0, seed=0, out=tmp_path, smoke=True)
    monkeypatch.setenv(LOGGED_ONLY, "1")
    with pytest.raises(FileNotFoundError, match="no finished run"):
        run(spec)
    assert not any(tmp_path.rglob("metrics.jsonl"))


def test_clean_keeps_text_and_figures_drops_stderr_and_widgets():
    nb = _executed([_stdout("kept\n"), {"output_type": "stream", "name": "stderr", "text": "100%|####|"},
                    {"output_type": "display_data", "metadata": {},
                     "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "abc"},
                              "text/plain": "interactive(...)"}},
                    _image(_png(90))])
    nb.metadata["widgets"] = {"state": {}}
    nb.cells[0].metadata["execution"] = {"iopub.status.busy": "2026"}
    out = clean(nb)
    kinds = [(o.output_type, o.get("name"), sorted(o.get("data", {}))) for o in out.cells[0].outputs]
    assert kinds == [("stream", "stdout", []), ("display_data", None, ["image/png", "text/plain"])]
    assert "widgets" not in out.metadata and "execution" not in out.cells[0].metadata
    assert image_rms(out.cells[0].outputs[1].data["image/png"], _png(90)) < 1.0


def test_palette_png_is_smaller_and_looks_the_same():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3), dpi=120)
    for k in range(6):
        ax.plot(np.sin(np.linspace(0, 6, 200) + k), label=f"curve {k}")
    ax.legend()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    raw = base64.b64encode(buf.getvalue()).decode("ascii")
    small = palette_png(raw)
    assert len(small) < len(raw) and image_rms(raw, small) < 2.0


def test_normalise_masks_durations_and_addresses_only():
    a = normalise("trained in 0.8 s; 12 min in all; <object at 0x7f12ab34cd>; accuracy 0.535   \n")
    b = normalise("trained in 1.3 s; 9 min in all; <object at 0x7f99ff00ee>; accuracy 0.535")
    assert a == b
    assert normalise("accuracy 0.535") != normalise("accuracy 0.536")


def test_compare_finds_what_changed():
    base = _executed([_stdout("accuracy 0.50 in 3 s\n")], [_image(_png(100))])
    assert compare(base, _executed([_stdout("accuracy 0.50 in 4 s\n")], [_image(_png(101))])) == []
    split = _executed([_stdout("accuracy "), _stdout("0.50 in 3 s\n")], [_image(_png(100))])    # prints, chunked
    assert compare(base, split) == []
    text = compare(base, _executed([_stdout("accuracy 0.53 in 3 s\n")], [_image(_png(100))]))
    assert len(text) == 1 and "code cell 1" in text[0] and "0.53" in text[0]
    assert compare(base, _executed([_stdout("accuracy 0.51 in 3 s\n")], [_image(_png(100))])) == []   # last digit
    figure = compare(base, _executed([_stdout("accuracy 0.50 in 3 s\n")], [_image(_png(160))]))
    assert len(figure) == 1 and "figure differs" in figure[0]
    assert "source changed" in compare(base, _executed([_stdout("accuracy 0.50\n")], [_image(_png(100))],
                                                       sources=["y = 0", "x = 1"]))[0]
    assert "code cells" in compare(base, _executed([_stdout("accuracy 0.50\n")]))[0]
    missing = compare(base, _executed([_stdout("accuracy 0.50 in 3 s\n")], []))
    assert "outputs" in missing[0]
    error = {"output_type": "error", "ename": "ValueError", "evalue": "boom", "traceback": []}
    assert compare(base, _executed([error], [_image(_png(100))]))


def test_a_live_cell_is_checked_for_its_kinds_of_output_not_its_values():
    """A cell tagged course-live trains on the building machine: other numbers elsewhere, the same outputs."""
    def live(*cells):
        nb = _executed(*cells)
        nb.cells[0].metadata["tags"] = [LIVE]
        return nb
    base = live([_stdout("accuracy 0.50\n"), _image(_png(100))], [_stdout("logged 0.7\n")])
    assert compare(base, live([_stdout("accuracy 0.71\n"), _image(_png(200))], [_stdout("logged 0.7\n")])) == []
    error = {"output_type": "error", "ename": "ValueError", "evalue": "boom", "traceback": []}
    assert "outputs" in compare(base, live([error], [_stdout("logged 0.7\n")]))[0]
    assert "logged" in compare(base, live([_stdout("accuracy 0.71\n"), _image(_png(200))],
                                          [_stdout("logged 0.9\n")]))[0]   # untagged cells: values still checked


def _run_folder(root, lines=None, config='{"steps": 2}'):
    folder = root / "runs" / "exp" / "on-policy" / "bapo" / "seed0"
    folder.mkdir(parents=True, exist_ok=True)
    lines = lines if lines is not None else ['{"step": 0, "rho": 0.5}', '{"step": 1, "rho": 0.4}',
                                             '{"step": 2, "final": true, "accuracy": 0.5}']
    (folder / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))
    (folder / "config.json").write_text(config)
    return folder


def test_collect_copies_logs_not_checkpoints(tmp_path):
    folder = _run_folder(tmp_path)
    for name in ("checkpoint.pt", ".lock"):
        (folder / name).write_text("{}")
    written = collect(tmp_path / "runs", tmp_path / "results", {"exp": "make it"})
    assert [p.relative_to(tmp_path / "results").as_posix() for p in written] == ["exp/on-policy/bapo/seed0"]
    assert sorted(p.name for p in written[0].iterdir()) == ["config.json", "metrics.jsonl"]
    with pytest.raises(FileNotFoundError, match="make it first"):
        collect(tmp_path / "runs", tmp_path / "results", {"other": "make it first"})


GOOD = ['{"step": 0, "rho": 0.5}', '{"step": 1, "rho": 0.4}', '{"step": 2, "final": true}']


@pytest.mark.parametrize("lines, config, named", [
    (['{"step": 0}', "not json", '{"step": 2, "final": true}'], '{"steps": 2}', "line 2"),
    (GOOD[:2], '{"steps": 2}', "no final record"),
    (['{"step": 0, "rho": NaN}', *GOOD[1:]], '{"steps": 2}', "line 1"),
    (['{"step": 0, "rho": Infinity}', *GOOD[1:]], '{"steps": 2}', "line 1"),
    ([GOOD[0], GOOD[0], GOOD[2]], '{"steps": 2}', "record 2"),
    ([GOOD[1], GOOD[0], GOOD[2]], '{"steps": 2}', "record 1"),
    ([GOOD[0], GOOD[2]], '{"steps": 2}', "1 updates logged"),
    ([GOOD[0], GOOD[2], GOOD[1]], '{"steps": 2}', "final record before the end"),
    (GOOD, '{"steps": "2"}', "config.json"),
    (GOOD, '{"steps": 2', "config.json"),
    ([], '{"steps": 2}', "empty"),
])
def test_collect_refuses_a_damaged_log_naming_it_and_changes_nothing(tmp_path, lines, config, named):
    """Issue 30: a non-JSON middle line, a log with no final record, a NaN: "198 run folders copied", exit 0. The
    gate names the file and the line, and results/ keeps what it held."""
    _run_folder(tmp_path, lines, config)
    dest = tmp_path / "results"
    (dest / "exp").mkdir(parents=True)
    (dest / "exp" / "kept.txt").write_text("old")
    with pytest.raises(ValueError, match=named) as err:
        collect(tmp_path / "runs", dest, {"exp": "make it"})
    assert "seed0" in str(err.value)
    assert (dest / "exp" / "kept.txt").read_text() == "old"


def test_collect_refuses_batches_that_are_not_tensors(tmp_path):
    folder = _run_folder(tmp_path)
    (folder / "batches.pt").write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match="batches.pt does not load as tensors"):
        collect(tmp_path / "runs", tmp_path / "results", {"exp": "make it"})


def test_every_committed_run_passes_the_gate():
    from toy_rl.course.logs import run_folders
    from toy_rl.rl.logbook import check_run
    folders = run_folders(RESULTS)
    assert folders
    for folder in folders:
        check_run(folder)


def test_unknown_notebook_is_a_clear_error():
    with pytest.raises(ValueError, match="no notebook named 99"):
        notebooks(["99"])


def test_committed_logs_are_data_only_and_small():
    warm = RESULTS / WARM_STARTS
    files = [p for p in RESULTS.rglob("*") if p.is_file() and p.name not in ("README.md", "about.json")
             and not p.is_relative_to(warm)]
    assert files, "results/ holds no logs: toy-rl course collect"
    assert {p.name for p in files} <= set(KEPT)
    assert {p.relative_to(RESULTS).parts[0] for p in files} <= {name.split("/")[0] for name in LOGGED}
    for p in files:
        if p.name == "config.json":
            assert isinstance(json.loads(p.read_text()), dict)
        elif p.name == "batches.pt":
            torch.load(p, weights_only=True)       # tensors only: nothing in results/ runs code when loaded
    # a budget: each rung-2 comparison adds ~4 MB of metrics.jsonl (~1 MB in git); rung 3's 20-run comparison ~0.9 MB
    assert size(RESULTS) < 32e6


def test_committed_warm_starts_are_tensors_that_match_their_fingerprints():
    from toy_rl.lm.warmstart import fingerprint
    from toy_rl.rl.run_folder import load_state
    folders = [p.parent for p in (RESULTS / WARM_STARTS).glob("*/meta.json")]
    for folder in folders:
        assert sorted(p.name for p in folder.iterdir()) == ["adapters.pt", "meta.json"]
        meta = json.loads((folder / "meta.json").read_text())
        assert fingerprint(load_state(folder / "adapters.pt")) == meta["fingerprint"]
    assert sum(p.stat().st_size for d in folders for p in d.iterdir()) < 8e6 * max(len(folders), 1)


def test_every_notebook_has_an_executed_copy_and_they_are_light():
    assert [p.name for p in COPIES] == [p.name for p in sorted(NOTEBOOKS.glob("*.ipynb"))]
    assert sum(p.stat().st_size for p in COPIES) < 12e6
    for p in COPIES:
        nb = nbformat.read(p, as_version=4)
        errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        assert not errors and any(c.outputs for c in nb.cells if c.cell_type == "code")
        if any("TRAIN = " in c.source for c in nb.cells if "parameters" in c.metadata.get("tags", [])):
            shown = " ".join(str(o.get("text", "")) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
            assert "read from the committed logs in ../results/" in shown, f"{p.name} does not say which logs it read"


@pytest.mark.parametrize("path", COPIES, ids=[p.name for p in COPIES])
def test_committed_copy_matches_a_fresh_execution_from_the_logs(path):
    differences = check([path.stem])[path.name]
    assert not differences, (f"{path.name} is stale ({len(differences)} differences; rebuild with "
                             f"`toy-rl course build {path.stem[:2]}`):\n" + "\n".join(differences[:20]))


def test_readme_states_the_committed_logs_as_they_are():
    import re
    from toy_rl.course.logs import ROOT, run_folders
    text = " ".join((ROOT / "README.md").read_text().split())
    found = re.search(r"no checkpoints, ([\d.]+) MB for the (\d+) runs the notebooks read", text)
    assert found, "README's 'Reading without running' names the size and number of the committed runs"
    assert float(found.group(1)) == round(size(RESULTS) / 1e6, 1)
    assert int(found.group(2)) == len(run_folders(RESULTS))


def test_logged_only_mode_names_the_damaged_line(tmp_path, monkeypatch):
    """Issue 30: with TOY_RL_LOGGED_ONLY a damaged log read as "no finished run ... missing", never naming the line."""
    from toy_rl.experiments import make_spec
    from toy_rl.experiments.layout import run_dir
    from toy_rl.experiments.runner import LOGGED_ONLY, run
    spec = make_spec("arithmetic", "add", rule="symmetric", steps=2, out=tmp_path / "exp")
    folder = run_dir(spec)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"steps": 2}')
    (folder / "metrics.jsonl").write_text('{"step": 0}\n{"step": 1, "rho": NaN}\n{"step": 2, "final": true}\n')
    monkeypatch.setenv(LOGGED_ONLY, "1")
    with pytest.raises(FileNotFoundError, match=r"damaged: .*metrics.jsonl, line 2"):
        run(spec)


def test_collect_takes_a_grid_cells_table_and_refuses_a_damaged_one(tmp_path):
    """Rung 1's grid cells (rows.json) pass the same gate: strict JSON, one finite value per seed."""
    folder = tmp_path / "runs" / "grid" / "p" / "eta1-task0"
    folder.mkdir(parents=True)
    row = {"rule": "bapo", "seed_ids": [0, 1], "per_seed": {"mean_reward": [0.5, 0.6]}}
    (folder / "rows.json").write_text(json.dumps({"settings": {}, "rows": [row]}))
    written = collect(tmp_path / "runs", tmp_path / "results", {"grid": "make it"})
    assert [p.name for p in written[0].iterdir()] == ["rows.json"]
    for bad, named in (('{"settings": {}, "rows": [{"rule": "bapo", "seed_ids": [0, 1], "per_seed": '
                        '{"mean_reward": [0.5, NaN]}}]}', "not strict JSON"),
                       (json.dumps({"settings": {}, "rows": [dict(row, per_seed={"mean_reward": [0.5]})]}),
                        "one finite number per seed"),
                       (json.dumps({"rows": []}), "not a comparison's table")):
        (folder / "rows.json").write_text(bad)
        with pytest.raises(ValueError, match=named):
            collect(tmp_path / "runs", tmp_path / "results", {"grid": "make it"})


def test_a_full_collect_keeps_the_committed_warm_starts(tmp_path):
    _run_folder(tmp_path)
    dest = tmp_path / "results"
    for name in ("warm-starts", "gone"):
        (dest / name / "x").mkdir(parents=True)
        (dest / name / "x" / "meta.json").write_text("{}")
    collect(tmp_path / "runs", dest, {"exp": "make it"})
    assert (dest / "warm-starts" / "x" / "meta.json").exists() and not (dest / "gone").exists()


def test_collect_only_some_experiments_leaves_the_others(tmp_path):
    _run_folder(tmp_path)
    dest = tmp_path / "results"
    (dest / "kept" / "x").mkdir(parents=True)
    (dest / "kept" / "x" / "config.json").write_text("{}")
    written = collect(tmp_path / "runs", dest, {"exp": "make it", "kept": "made earlier"}, only=["exp"])
    assert len(written) == 1 and (dest / "kept" / "x" / "config.json").exists()
    with pytest.raises(ValueError, match="unknown experiment"):
        collect(tmp_path / "runs", dest, {"exp": "make it"}, only=["nope"])


def test_collect_finished_copies_an_experiment_still_training_as_far_as_it_got(tmp_path):
    """A comparison trained across sessions: its finished runs go into results/, each unfinished one (a clean log
    without its final record, one with no log yet) is named and left out; a damaged one is still refused."""
    _run_folder(tmp_path)
    running = tmp_path / "runs" / "exp" / "on-policy" / "bapo" / "seed1"
    shutil.copytree(tmp_path / "runs" / "exp" / "on-policy" / "bapo" / "seed0", running)
    (running / "metrics.jsonl").write_text(GOOD[0] + "\n" + GOOD[1][:9])          # update 1 being written
    started = running.parent / "seed2"
    started.mkdir()
    (started / "config.json").write_text('{"steps": 2}')
    with pytest.raises(ValueError, match="seed1"):
        collect(tmp_path / "runs", tmp_path / "results", {"exp": "make it"})
    skipped = []
    written = collect(tmp_path / "runs", tmp_path / "results", {"exp": "make it"}, finished=True, skipped=skipped)
    assert [p.name for p in written] == ["seed0"] and skipped == [(running, 1), (started, 0)]
    assert not (tmp_path / "results" / "exp" / "on-policy" / "bapo" / "seed1").exists()
    landed = tmp_path / "results" / "exp" / "on-policy" / "symmetric" / "seed0"   # landed by an earlier session
    shutil.copytree(tmp_path / "results" / "exp" / "on-policy" / "bapo" / "seed0", landed)
    written = collect(tmp_path / "runs", tmp_path / "results", {"exp": "make it"}, finished=True)
    assert [p.name for p in written] == ["seed0"] and (landed / "metrics.jsonl").exists()
    (running / "metrics.jsonl").write_text(GOOD[1] + "\n")                         # update 0 missing: damage
    with pytest.raises(ValueError, match="record 1"):
        collect(tmp_path / "runs", tmp_path / "results", {"exp": "make it"}, finished=True)


def test_numbers_the_text_states_that_no_output_shows_are_flagged():
    """Issue 24: notebook 04's copy said the warm start "stops at 50 %" next to a printed 0.328; 06 said "±4.5 points"
    next to "± 0.049". The check lists such numbers (math, code and section numbers are not numbers to check)."""
    from toy_rl.course.outputs import unbacked_numbers
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("The warm start stops at 50 % and BAPO reaches 0.452 (§3.1, $x = 0.25$, `0.75`)."),
        nbformat.v4.new_code_cell("print(acc)", outputs=[nbformat.v4.new_output("stream", name="stdout",
                                                                                text="accuracy 0.328 share 0.452\n")]),
        nbformat.v4.new_markdown_cell("It held in 32.8 % of runs, ρ 0.33 of the loss."),
    ])
    assert unbacked_numbers(nb) == ["markdown cell 1: 50", "markdown cell 2: 0.33"]


def test_no_reading_copy_prints_a_line_over_400_characters():
    """Issue 24: verdicts printed as one line each of 300-4,165 characters (verdict walls); now cards."""
    for path in COPIES:
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
            for out in cell.outputs:
                text = out.get("text", "") if out.output_type == "stream" else out.get("data", {}).get("text/plain", "")
                too_long = [line[:80] for line in str(text).splitlines() if len(line) > 400]
                assert not too_long, f"{path.name}, code cell {i + 1}: {too_long}"


def test_numbers_one_unit_apart_in_their_last_digit_are_the_same_output():
    """Another CPU's float rounding moves 0.1435 across a rounding boundary; the words, the layout, the printed
    precision and anything further apart still count as a difference."""
    from toy_rl.course.outputs import same_to_last_digit
    assert same_to_last_digit("[0.8, 1.2]   -0.162   0.039   0.144", "[0.8, 1.2]   -0.162   0.039   0.143")
    assert same_to_last_digit("clipped share 11.2%", "clipped share 11.1%")
    assert not same_to_last_digit("clipped share 11.2%", "clipped share 11.0%")        # two units
    assert not same_to_last_digit("0.144", "0.14")                                    # another precision
    assert not same_to_last_digit("symmetric 0.144", "bapo 0.144")
    assert not same_to_last_digit("7 of 20 runs", "8 of 20 runs, more")
