"""What a reader sees without running anything: the notebooks' key figures (``toy-rl figures``) and a one-page
report per rung (``toy-rl report``), both drawn by the notebooks' own plotting functions from runs made by
the existing runners (finished runs under ``runs/`` are read back, not recomputed).

    from toy_rl.report import render_figures, build_report, write_report
    render_figures(["02"], out="docs/figures")               # one figure, its caption, the index
    write_report(build_report(1), "rung1.html", "html")      # one self-contained page

Files: runs (each rung's default comparison through its runner, and what config the runs on disk have),
figures (the figure registry and its captions), rungs (a report's content), document (Markdown / HTML),
png (small PNGs), machine (where and when).
"""
from .document import write_report
from .figures import FIGURES, render_figures
from .rungs import RUNGS, Report, ReportError, build_report

__all__ = ["FIGURES", "RUNGS", "Report", "ReportError", "build_report", "render_figures", "write_report"]
