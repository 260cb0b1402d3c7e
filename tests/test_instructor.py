"""The instructor pack (docs/instructor/): the rendered solutions stay current, the HTML of a reading copy renders
its math from a local MathJax, and the slide figures are 16:9 with readable text and alt texts."""
import re

import pytest

from toy_rl.course.instructor import SOLUTIONS_PAGE, reference_source, solutions_markdown, verdict
from toy_rl.exercises import exercises

INSTRUCTOR = SOLUTIONS_PAGE.parent


# ---------------------------------------------------------------------------------------- rendered solutions

def test_every_reference_answer_passes_its_check_and_shows_its_code():
    for ex in exercises():
        ok, said = verdict(ex)
        assert ok and said.startswith("✓ right"), (ex.name, said)
        source = reference_source(ex)
        assert f"def {ex.name}(" in source or f"{ex.name} =" in source, ex.name


def test_reference_source_brings_the_constants_it_uses():
    from toy_rl.exercises import get
    source = reference_source(get("bapo_step"))
    assert "TOL = 1e-9" in source and source.index("TOL =") < source.index("def bapo_step(")


def test_committed_solutions_page_is_what_the_command_writes_now():
    pytest.importorskip("peft")           # notebook 06's LoRA check compares with peft's own layer (llm extra)
    now = solutions_markdown()
    assert SOLUTIONS_PAGE.is_file(), "docs/instructor/solutions.md is missing: run `toy-rl course instructor`"
    assert SOLUTIONS_PAGE.read_text() == now, ("docs/instructor/solutions.md is stale (a solution, check or "
                                              "exercise changed): run `toy-rl course instructor`")
    n = len(exercises())
    assert f"{n} of {n} reference answers pass their checks." in now


# ---------------------------------------------------------------------------------------- offline math in HTML

def test_html_reading_copy_loads_mathjax_from_beside_it_and_nothing_from_the_web(tmp_path):
    pytest.importorskip("jupyter_server_mathjax")
    from toy_rl.course.html import MATHJAX_DIR, remote_loads, to_html
    out = to_html("01", tmp_path / "nb01.html")
    html = out.read_text(encoding="utf-8")
    assert remote_loads(html) == []
    assert "require.min.js" not in html and "mermaid" not in html
    assert not re.search(r"https?://[^\"'\s]*mathjax", html, re.I)
    src = re.findall(r'<script[^>]+src="([^"]*MathJax\.js[^"]*)"', html)
    assert src and all(s.startswith(f"{MATHJAX_DIR}/MathJax.js?config=") for s in src), src
    assert (tmp_path / MATHJAX_DIR / "MathJax.js").is_file()
    for name in src[0].split("config=")[1].split(","):            # every config file the URL asks for is there
        assert (tmp_path / MATHJAX_DIR / "config" / f"{name}.js").is_file(), name
    assert (tmp_path / MATHJAX_DIR / "fonts" / "HTML-CSS" / "STIX-Web" / "woff").is_dir()
    assert "$\\pi = \\operatorname{softmax}(z)$" in html            # the math is there for MathJax to typeset


def test_remote_loads_finds_what_a_page_would_fetch():
    from toy_rl.course.html import remote_loads
    page = ('<script src="https://cdn.example/require.js"></script><link rel="stylesheet" href="http://x.org/a.css">'
            '<img src="https://x.org/p.png"> <a href="https://arxiv.org/abs/2510.18927">paper</a>'
            'await import("https://cdn.example/mermaid.mjs"); <script src="mathjax/MathJax.js"></script>')
    assert remote_loads(page) == ["https://cdn.example/require.js", "https://x.org/p.png", "http://x.org/a.css",
                                  "https://cdn.example/mermaid.mjs"]


def test_html_refuses_an_unknown_notebook(tmp_path):
    from toy_rl.course.html import reading_copy
    with pytest.raises(ValueError, match="no single reading copy"):
        reading_copy("99")


# ---------------------------------------------------------------------------------------- slides

def test_for_slides_makes_a_16_9_figure_with_no_small_text():
    from toy_rl import diagrams
    from toy_rl.course.slides import MIN_FONT, for_slides, smallest_font
    fig = diagrams.quadrants()
    assert smallest_font(fig) < MIN_FONT                        # the notebook's size: too small for a slide
    for_slides(fig)
    w, h = fig.get_size_inches()
    assert abs(w / h - 16 / 9) < 0.01
    assert smallest_font(fig) >= MIN_FONT


def test_render_slides_writes_pngs_and_an_index_with_alt_texts(tmp_path):
    from PIL import Image

    from toy_rl.course.slides import render_slides
    from toy_rl.diagrams import ALT
    entries = render_slides(["00"], tmp_path)
    assert {e["name"] for e in entries} == {"00-clipping", "00-diagram-quadrants", "00-diagram-bapo-search"}
    index = (tmp_path / "README.md").read_text()
    for e in entries:
        with Image.open(tmp_path / e["file"]) as im:
            assert im.size == (1600, 900)
        assert f"]({e['file']})" in index and e["alt"] in index
    assert ALT["quadrants"] in index
    assert "toy-rl course slides 00" in index


def test_committed_slides_are_16_9_small_and_each_has_alt_text():
    from PIL import Image
    slides = INSTRUCTOR / "slides"
    pngs = sorted(slides.glob("*.png"))
    if not pngs:
        pytest.skip("no committed slides")
    index = (slides / "README.md").read_text()
    assert sum(p.stat().st_size for p in pngs) < 1_500_000
    for p in pngs:
        with Image.open(p) as im:
            assert im.size == (1600, 900), p.name
        entry = index.split(f"]({p.name})", 1)
        assert len(entry) == 2 and "**Alt text.** " in entry[1].split("###", 1)[0], p.name
    from toy_rl.report.figures import FIGURES
    assert {f"{name}.png" for name in FIGURES} <= {p.name for p in pngs}   # every notebook's key figure
