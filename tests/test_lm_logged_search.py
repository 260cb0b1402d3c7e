"""toy_rl.lm.logged_search and its view (notebook 06 §6b): BAPO's search re-run on logged rung-3 batches gives
policy_loss's own bounds and ρ on every batch (any ρ0, ranges, aggregation or batch shape), reads batches.pt
safely, summarises the search, and the sliders' view redraws. Synthetic batches (no model); the logged SmolLM2
run too (from runs/, or the copy committed in results/)."""
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from toy_rl.clipping import BAPO, policy_loss
from toy_rl.lm.logged_search import LoggedBatch, load_batches, logged_batches, search_batches, search_summary
from toy_rl.lm.views.logged_search import search_callback, search_view
from toy_rl.rl.run_folder import save_state

ROOT = Path(__file__).resolve().parents[1]
RUN = Path("smollm2-135m-add") / "reuse-4" / "bapo" / "seed0"
LOGGED = next((root / RUN for root in (ROOT / "runs", ROOT / "results") if (root / RUN / "batches.pt").is_file()),
              ROOT / "runs" / RUN)           # your own run, else the logs committed in results/ (notebook 06 reads)


def _batch(seed: int, answers: int = 16, tokens: int = 5, drift: float = 0.4, agg: str = "token-mean", bias=0.0):
    """A stale GRPO-like batch: ragged answers, group-centred advantages, behaviour log-probs ``drift`` away."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, tokens + 1, (answers,), generator=g)
    mask = torch.arange(tokens)[None] < lengths[:, None]
    old = -torch.rand(answers, tokens, generator=g) * 2
    logp = old + drift * torch.randn(answers, tokens, generator=g)
    adv = torch.randn(answers, generator=g) + bias
    adv = adv - adv.mean()
    _, stats = policy_loss(logp, old, adv, mask.float(), BAPO(), agg=agg)
    return dict(logp=logp, old_logp=old, advantages=adv, mask=mask, c_low=stats["c_low"], c_high=stats["c_high"],
                step=seed, agg=agg)


def _logged(n=12):
    shapes = [(16, 5), (16, 5), (8, 12)]
    return [LoggedBatch(f"run{i % 3}", i, _batch(i, *shapes[i % 3], agg="seq-mean-token-mean" if i % 4 == 3 else
                                                 "token-mean", bias=0.3 * (i % 2))) for i in range(n)]


@pytest.mark.parametrize("settings", [dict(), dict(rho0=0.5), dict(rho0=0.55, low_range=(0.5, 0.8),
                                                                    high_range=(1.1, 2.0)),
                                      dict(rho0=0.6, low_range=(0.7, 0.7), high_range=(1.3, 1.3))])
def test_search_is_policy_loss_on_every_batch(settings):
    batches = _logged()
    table = search_batches(batches, **settings)
    rule = BAPO(**settings)
    assert table["updates"] == len(batches) and table["rule"] == rule
    for i, lb in enumerate(batches):
        b = lb.batch
        _, st = policy_loss(b["logp"], b["old_logp"], b["advantages"], b["mask"].float(), rule, agg=b["agg"])
        assert (table["c_low"][i], table["c_high"][i]) == (st["c_low"], st["c_high"])
        assert table["rho"][i] == pytest.approx(st["rho"], abs=1e-6)
        assert table["rho_before"][i] == pytest.approx(st["rho_before"], abs=1e-6)
        assert table["steps"][i] == st["search_steps"] and table["reached"][i] == (st["rho_reached"] == 1.0)
    assert (table["moved"] == (table["steps"] > 0)).all()
    assert (table["at_end"] <= ~table["reached"]).all()
    assert table["rho_path"].shape == (len(batches), rule.path_size()) == (len(batches), len(table["path_low"]))


def test_default_search_gives_the_bounds_the_logged_bapo_run_used():
    table = search_batches(_logged())                          # _batch logged BAPO()'s own choice
    assert np.allclose(table["c_low"], table["logged_c_low"]) and np.allclose(table["c_high"], table["logged_c_high"])


def test_summary_counts_the_search():
    table = search_batches(_logged(), rho0=0.52)
    s = search_summary(table)
    below = table["rho_before"] < 0.52
    assert s["updates"] == 12 and s["below"] == pytest.approx(below.mean()) and s["moved"] == s["below"]
    assert s["reached_when_needed"] == pytest.approx(table["reached"][below].mean())
    assert s["at_end"] == pytest.approx((~table["reached"]).mean())          # a share target: only the end fails
    assert s["c_high"] == pytest.approx(table["c_high"].mean()) and s["rho0"] == 0.52
    nobody = search_summary(search_batches(_logged(), rho0=0.1))
    assert nobody["moved"] == 0.0 and math.isnan(nobody["reached_when_needed"])


def test_logged_batches_reads_each_run_safely(tmp_path):
    a, b, empty, bad = (tmp_path / n for n in ("a", "b", "empty", "bad"))
    for folder in (a, b, empty, bad):
        folder.mkdir()
    save_state(a / "batches.pt", {1: _batch(1), 0: _batch(0)})
    save_state(b / "batches.pt", {3: _batch(3)})
    got = logged_batches({"first": a, "second": b, "none": empty})
    assert [(x.run, x.step) for x in got] == [("first", 0), ("first", 1), ("second", 3)]
    assert [x.run for x in logged_batches([a])] == [str(Path(*a.parts[-3:]))] * 2
    assert load_batches(empty) == {}
    torch.save({0: {"x": Path("/")}}, bad / "batches.pt")           # a pickled object: refused, never run
    with pytest.raises(ValueError, match="refused|Python objects"):
        load_batches(bad)
    with pytest.raises(ValueError, match="no logged batches"):
        search_batches([])


def test_view_and_callback_follow_the_sliders(monkeypatch):
    batches = _logged()
    fig, low = search_view(batches, 0.4)
    _, high = search_view(batches, 0.6)
    assert isinstance(fig, Figure) and low["low_range"] == (0.6, 0.9) and high["high_range"] == (1.2, 3.0)
    assert high["moved"] >= low["moved"] and high["c_high"] >= low["c_high"]
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    out = search_callback(batches)(0.55, (0.5, 0.8000000000000002), (1.1, 2.0))
    assert len(shown) == 1 and isinstance(shown[0], Figure)
    assert out["rho0"] == 0.55 and out["low_range"] == (0.5, 0.8) and out["high_range"] == (1.1, 2.0)


@pytest.mark.skipif(not (LOGGED / "batches.pt").is_file(), reason="neither runs/ nor results/ holds the logged SmolLM2 BAPO run")
def test_on_the_logged_smollm2_run_the_paper_search_repeats_the_run():
    batches = logged_batches({"bapo": LOGGED})
    table = search_batches(batches)
    assert table["updates"] >= 2
    assert np.allclose(table["c_low"], table["logged_c_low"]) and np.allclose(table["c_high"], table["logged_c_high"])


@pytest.mark.parametrize("damage, named", [
    (lambda b: {0: {**b[0], "logp": b[0]["logp"][:, :1]}}, "shapes do not match"),
    (lambda b: {0: {k: v for k, v in b[0].items() if k != "mask"}}, "no tensor mask"),
    (lambda b: {0: {**b[0], "old_logp": torch.full_like(b[0]["old_logp"], float("nan"))}}, "NaN or inf"),
    (lambda b: {0: {**b[0], "mask": torch.zeros_like(b[0]["mask"])}}, "mask is all zero"),
    (lambda b: {"0": b[0]}, "not an update number"),
    (lambda b: [b[0]], "does not hold stored batches"),
])
def test_a_malformed_batches_file_is_one_message_naming_it(tmp_path, damage, named):
    """Issue 30: a malformed batches.pt was an IndexError / KeyError / "invalid literal for int()" naming no file, and
    a NaN batch or an all-zero mask replayed as rho = 1.0 ("target reached")."""
    from toy_rl.lm.logged_search import load_batches
    from toy_rl.rl.run_folder import save_state
    good = {0: {"logp": torch.randn(2, 3), "old_logp": torch.randn(2, 3), "advantages": torch.randn(2, 1),
                "mask": torch.ones(2, 3)}}
    save_state(tmp_path / "batches.pt", damage(good))
    with pytest.raises(ValueError, match=named) as err:
        load_batches(tmp_path)
    assert "batches.pt" in str(err.value)


def test_the_search_refuses_nan_and_empty_batches_as_the_loss_does():
    from toy_rl.clipping import BAPO
    ratio, adv, mask = torch.ones(1, 4), torch.tensor([[1.0, -1.0, 0.5, -0.5]]), torch.ones(1, 4)
    with pytest.raises(ValueError, match="NaN"):
        BAPO().bounds(torch.full_like(ratio, float("nan")), adv, mask)
    with pytest.raises(ValueError, match="all zero"):
        BAPO().bounds(ratio, adv, torch.zeros_like(mask))
    with pytest.raises(ValueError, match="weights must be >= 0"):
        BAPO().bounds(ratio, adv, mask, weights=-mask)
