"""The verdict card (toy_rl.card): one row per claim, the test that decides it, every test one click away."""
import pytest

from toy_rl.card import deciding_test, verdict_card
from toy_rl.verdicts import Claim, Regime, judge, paired


def _verdicts():
    regime = Regime("negatives-dominate", 0.92, 0.47, 100)
    a = [0.50, 0.52, 0.55, 0.51, 0.53, 0.54]
    ahead = paired("mean reward, lag 4", "BAPO", [x + 0.06 for x in a], "clip-higher", a, ">", scale=100,
                   unit=" points", min_effect=0.01)
    behind = paired("mean reward, lag 2", "BAPO", [x - 0.03 + 0.001 * i for i, x in enumerate(a)], "symmetric", a,
                    ">", scale=100, unit=" points", min_effect=0.01)
    tie = paired("mean reward, lag 2", "BAPO", [x + 0.001 * (-1) ** i for i, x in enumerate(a)], "fixed", a, ">",
                 scale=100, unit=" points", min_effect=0.01)
    return judge([Claim(5, "BAPO > the rest", [ahead, behind], "", regime), Claim(6, "adaptive > fixed", [tie],
                                                                                   "", regime),
                  Claim(4, "ρ near ρ0", untestable="the search never had to move")])


def test_the_deciding_test_follows_the_verdict():
    v5, v6, v4 = _verdicts()
    assert v5.status == "contradicted" and deciding_test(v5).b == "symmetric"       # the test against it
    assert v6.status == "inconclusive" and deciding_test(v6).b == "fixed"
    assert deciding_test(v4) is None


def test_the_card_is_a_short_table_with_every_test_behind_it():
    card = verdict_card(_verdicts(), figure="the figure above", title="rung 1")
    html = card._repr_html_()
    assert html.count("<tr>") == 4 and "<details>" in html and "the figure above" in html
    assert "CONTRADICTED (0 for, 1 against, of 2)" in html and "NOT TESTABLE: the search never had to move" in html
    text = str(card)
    flat = " ".join(text.split())
    assert "BAPO − symmetric: -2.75 points" in flat and "negatives-dominate (ρ < ρ0 in 92%; bounds moved in 47%)" in flat
    assert max(len(line) for line in text.splitlines() + card.detail_lines()) <= 110
    with pytest.raises(ValueError, match="Verdicts"):
        verdict_card(["claim 5 (...): SUPPORTED"])
    with pytest.raises(ValueError, match="at least one"):
        verdict_card([])
