"""Write a :class:`~toy_rl.report.rungs.Report` as one page: Markdown with its PNGs beside it, or a single
self-contained HTML file (every PNG embedded as base64, no other file needed to hand it out)."""
from __future__ import annotations

import html
import os
import re
from pathlib import Path

from .png import data_uri, png_bytes
from .rungs import Report

FORMATS = ("html", "md")


def check_out(path, fmt: str) -> Path:
    """The file to write (``path`` itself, or ``rung<N>.<fmt>`` inside it if it is a folder), after making sure
    its folder exists and is writable; ValueError naming --out otherwise. Call it before any long work."""
    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"--out: cannot create the folder {folder}: {err.strerror or err}") from None
    if not os.access(folder, os.W_OK):
        raise ValueError(f"--out: the folder {folder} is not writable")
    if path.exists() and not path.is_dir() and not os.access(path, os.W_OK):
        raise ValueError(f"--out: {path} exists and is not writable")
    return path


def _code(text: str) -> str:
    """`x` spans as <code> (the only markup the facts use), everything else escaped."""
    return re.sub(r"`([^`]*)`", r"<code>\1</code>", html.escape(text))


def to_markdown(report: Report, image_names: list[str]) -> str:
    lines = [f"# {report.title}", "", report.lead, ""]
    lines += [f"- **{label}:** {value}" for label, value in report.facts] + [""]
    for (name, _, caption), file in zip(report.figures, image_names):
        lines += [f"![{name}]({file})", "", f"*{caption}*", ""]
    t = report.table
    cell = lambda s: str(s).replace("|", "\\|")
    lines += ["## Summary", "", "| " + " | ".join(map(cell, t.headers)) + " |",
              "|" + "|".join(["---"] * len(t.headers)) + "|"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in t.rows]
    lines += ["", t.note, ""]
    if report.verdicts:
        lines += ["## The paper's claims at this scale", ""] + [f"- {v}" for v in report.verdicts] + [""]
    lines += [n for note in report.notes for n in (note, "")]
    return "\n".join(lines)


STYLE = """body{font-family:system-ui,sans-serif;max-width:1150px;margin:1.5em auto;padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.45em}h2{font-size:1.15em;margin-top:1.4em}ul.facts{padding-left:1.2em}code{background:#f3f3f3;padding:0 3px}
img{max-width:100%;border:1px solid #ddd}figure{margin:1em 0}figcaption{font-size:.9em;color:#444}
table{border-collapse:collapse;font-size:.82em}th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}td{white-space:nowrap}
th{background:#f0f0f0}td:nth-child(-n+2){text-align:left}.note{font-size:.88em;color:#444}li{margin:.3em 0}
@media print{body{max-width:none;margin:0}figure{break-inside:avoid}}"""


def to_html(report: Report, images: list[bytes]) -> str:
    e = html.escape
    parts = ["<!doctype html>", "<html lang='en'><head><meta charset='utf-8'>", f"<title>{e(report.title)}</title>",
             f"<style>{STYLE}</style></head><body>", f"<h1>{e(report.title)}</h1>", f"<p>{e(report.lead)}</p>",
             "<ul class='facts'>"]
    parts += [f"<li><b>{e(label)}:</b> {_code(value)}</li>" for label, value in report.facts]
    parts.append("</ul>")
    for (name, _, caption), png in zip(report.figures, images):
        parts.append(f"<figure><img alt='{e(name)}' src='{data_uri(png)}'><figcaption>{e(caption)}</figcaption></figure>")
    t = report.table
    parts += ["<h2>Summary</h2>", "<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in t.headers)
              + "</tr></thead><tbody>"]
    parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in t.rows]
    parts += ["</tbody></table>", f"<p class='note'>{e(t.note)}</p>"]
    if report.verdicts:
        parts += ["<h2>The paper's claims at this scale</h2>", "<ul>"]
        parts += [f"<li>{e(v)}</li>" for v in report.verdicts] + ["</ul>"]
    parts += [f"<p class='note'>{e(n)}</p>" for n in report.notes]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(report: Report, out, fmt: str = "html") -> list[Path]:
    """Write the page (and, for Markdown, ``<stem>-<figure>.png`` beside it); returns the files written."""
    path = check_out(out, fmt)
    if path.is_dir():
        path = path / f"rung{report.rung}.{fmt}"
    images = [png_bytes(fig) for _, fig, _ in report.figures]
    if fmt == "html":
        path.write_text(to_html(report, images), encoding="utf-8")
        return [path]
    names = [f"{path.stem}-{name}.png" for name, _, _ in report.figures]
    for name, png in zip(names, images):
        (path.parent / name).write_bytes(png)
    path.write_text(to_markdown(report, names), encoding="utf-8")
    return [path] + [path.parent / n for n in names]
