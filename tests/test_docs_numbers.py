"""Numbers the docs quote agree with the code (issue 13): the rung-2 model's size, wherever it is quoted, and the
rung-3 table's p-values (issue 11)."""
import json
import re
from pathlib import Path

from toy_rl.arithmetic.model import GPT, ModelConfig

ROOT = Path(__file__).resolve().parents[1]
SIZE = re.compile(r"(\d[\d,.]*\s?[kK]?)[- ]param(?:eter)?s?\b(?! cell)")


def _texts():
    """(name, text) of every doc and notebook that describes rung 2 (notebooks: markdown and code comments)."""
    for path in [ROOT / "README.md", ROOT / "notebooks" / "README.md", ROOT / "bench" / "README.md",
                 *sorted((ROOT / "docs").glob("*.md")), ROOT / "docs" / "figures" / "README.md"]:
        yield path.name, path.read_text()
    for path in sorted((ROOT / "notebooks").glob("0[0-6]*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        yield path.name, "\n".join("".join(c["source"]) for c in cells)


def test_the_rung2_model_has_211520_parameters_wherever_it_is_quoted():
    assert GPT(ModelConfig()).num_params() == 211_520
    quoted = []
    for name, text in _texts():
        for line in text.splitlines():
            if "GPT" in line or "rung 2" in line.lower() or "rung-2" in line or "211" in line or "212" in line:
                quoted += [(name, m.group(1).strip()) for m in SIZE.finditer(line) if m.group(1)[:2] in ("21", "0.")]
    assert quoted, "the README quotes the model's size"
    wrong = [(name, q) for name, q in quoted if q != "211,520"]
    assert not wrong, wrong


def test_the_rung3_table_follows_from_its_per_seed_accuracies():
    """The README's search-hard-warm table: differences and Holm-adjusted p-values recomputed from the per-seed
    final accuracies it prints (the area under the curve is the mean of the start, 0.32, and the end)."""
    from toy_rl.stats import holm, paired_test
    text = (ROOT / "README.md").read_text()
    table = text[text.index("| rule | auc accuracy | final accuracy (seed 0 / 1)"):].split("\n\n")[0]
    row = re.compile(r"^\| (.+?) \| [\d.]+ ± [\d.]+ \| [\d.]+ ± [\d.]+ \(([\d.]+) / ([\d.]+)\) \|(.*)\|$")
    rows = {m[1]: ([float(m[2]), float(m[3])], m[4]) for m in map(row.match, table.splitlines()[2:])}
    bapo = rows.pop("BAPO")[0]
    quoted, tests = [], []
    for finals, cells in rows.values():
        for end in (lambda x: (0.32 + x) / 2, lambda x: x):             # auc, then final
            tests.append(paired_test([end(x) for x in bapo], [end(x) for x in finals]))
        quoted += re.findall(r"([+−-][\d.]+) points, ([\d.]+)", cells)
    adjusted = holm([t["p"] for t in tests])
    assert len(quoted) == len(tests) == 6
    for t, p, (diff, p_quoted) in zip(tests, adjusted, quoted):
        assert abs(t["diff"] * 100 - float(diff.replace("−", "-"))) <= 0.051 and round(p, 2) == float(p_quoted)
