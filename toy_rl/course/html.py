"""A reading copy (``docs/course/NN_*.ipynb``) as HTML whose math renders offline: ``toy-rl course html NN``.

nbconvert's HTML template loads MathJax from a CDN, so a copy opened without a network shows raw ``$...$``. Here
the template's ``mathjax_url`` points at a MathJax 2.7 copied beside the HTML (``mathjax/``, about 3 MB) from the
files the ``jupyter-server-mathjax`` package ships (the ``instructor`` and ``dev`` extras install it): the same
MathJax the classic notebook served, with its STIX web fonts. The lab template's other web scripts (require.js for
live widgets, mermaid for diagrams, the widget manager) are left out by :data:`OFFLINE_TEMPLATE`: the reading copies
show sliders as static images and draw diagrams with matplotlib. So the page loads nothing from the network, and
:func:`remote_loads` lists anything it would load (the tests check it is empty).

Open the HTML from its folder (``mathjax/`` must stay beside it); copy the folder to move it.
"""
from __future__ import annotations

import filecmp
import re
import shutil
from pathlib import Path

from .logs import COURSE, ROOT

HTML_OUT = ROOT / "build" / "course-html"            # the default --out (build/ is ignored by git: 3 MB of MathJax)
MATHJAX_DIR = "mathjax"                              # beside the HTML
CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe,local/offline"
# Left out of the copy: the SVG output's fonts, the translations and the accessibility extensions (none is used by
# the HTML-CSS output this page asks for): 3 MB instead of 12.
SKIPPED = ("jax/output/SVG", "localization", "extensions/a11y")
# What the classic notebook configured for this MathJax (it ships the STIX web fonts only), read from
# config/local/offline.js, the last file the URL's config= loads.
LOCAL_CONFIG = """MathJax.Hub.Config({
  "HTML-CSS": {availableFonts: [], imageFont: null, preferredFont: null, webFont: "STIX-Web",
               linebreaks: {automatic: true}},
  messageStyle: "none"
});
MathJax.Ajax.loadComplete("[MathJax]/config/local/offline.js");
"""
# nbconvert's lab template without the blocks that load scripts from the web.
OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
"""


def mathjax_source() -> Path:
    """The MathJax 2.7 files of the installed ``jupyter_server_mathjax`` package (ModuleNotFoundError naming the
    extra to install when it is missing)."""
    try:
        import jupyter_server_mathjax
    except ModuleNotFoundError:
        raise ModuleNotFoundError("toy-rl course html needs the MathJax files of the jupyter-server-mathjax package: "
                                  "pip install -e '.[instructor]' (or bash scripts/setup.sh dev,llm)") from None
    static = Path(jupyter_server_mathjax.__file__).parent / "static"
    if not (static / "MathJax.js").is_file():
        raise FileNotFoundError(f"{static / 'MathJax.js'} is missing: reinstall jupyter-server-mathjax")
    return static


def copy_mathjax(dest: Path) -> Path:
    """Copy MathJax (less :data:`SKIPPED`) into ``dest`` and write its offline config; files already there and
    identical are left alone. Returns ``dest``."""
    src = mathjax_source()
    dest = Path(dest)
    for f in sorted(src.rglob("*")):
        rel = f.relative_to(src).as_posix()
        if f.is_dir() or any(rel == s or rel.startswith(s + "/") for s in SKIPPED):
            continue
        target = dest / rel
        if target.is_file() and filecmp.cmp(f, target, shallow=False):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, target)
    local = dest / "config" / "local" / "offline.js"
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_text(LOCAL_CONFIG)
    return dest


def reading_copy(name: str) -> Path:
    """``docs/course/<name>*.ipynb`` for a notebook number or name ("04", "04_arithmetic_transformer")."""
    found = [p for p in sorted(COURSE.glob("*.ipynb")) if p.stem.startswith(name.removesuffix(".ipynb"))]
    if len(found) != 1:
        known = ", ".join(p.stem for p in sorted(COURSE.glob("*.ipynb")))
        raise ValueError(f"no single reading copy named {name!r} in {COURSE}; one of {known}")
    return found[0]


def notebook_html(path: Path, mathjax_url: str) -> str:
    """The notebook at ``path`` as one HTML page (nbconvert's lab template less its web scripts, images embedded)
    loading MathJax from ``mathjax_url``."""
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter
    exporter = HTMLExporter(template_name="lab", mathjax_url=mathjax_url, template_file="offline.html.j2",
                            extra_loaders=[jinja2.DictLoader({"offline.html.j2": OFFLINE_TEMPLATE})])
    body, _ = exporter.from_notebook_node(nbformat.read(path, as_version=4))
    return body


def remote_loads(html: str) -> list[str]:
    """Every http(s) URL that ``html`` would load: script and image sources, ``<link>`` targets, ``import(...)``,
    and any URL naming MathJax (what an offline page must not hold; links a reader clicks are fine)."""
    url = r"[\"'](https?://[^\"']+)"
    loads = re.findall(r"<(?:script|img)[^>]*\ssrc=" + url, html) + re.findall(r"<link[^>]*\shref=" + url, html)
    loads += re.findall(r"import\(\s*" + url, html)
    return loads + [u for u in re.findall(r"https?://[^\s\"'<>)]+", html) if "mathjax" in u.lower() and u not in loads]


def to_html(name: str, out: Path | str | None = None) -> Path:
    """Convert the reading copy ``name`` to ``out`` (default :data:`HTML_OUT`/``<stem>.html``) with
    MathJax copied into ``mathjax/`` beside it; returns the HTML's path."""
    path = reading_copy(name)
    out = Path(out) if out is not None else HTML_OUT / f"{path.stem}.html"
    if out.suffix != ".html":
        out = out / f"{path.stem}.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    copy_mathjax(out.parent / MATHJAX_DIR)
    html = notebook_html(path, f"{MATHJAX_DIR}/MathJax.js?config={CONFIG}")
    left = remote_loads(html)
    if left:
        raise RuntimeError(f"the HTML of {path.name} still loads from the web: {left[:3]}")
    out.write_text(html, encoding="utf-8")
    return out
