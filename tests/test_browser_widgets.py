"""Notebook 00's sliders in a real browser: JupyterLab + Chromium, driven by Playwright.

What a learner does: open ``notebooks/00_clipping.ipynb`` in JupyterLab, Run → Run All Cells,
move the ``c_high`` slider, and see the figure and the summary redraw. The nbclient tests
(tests/test_notebooks.py) run the cells but never render a widget nor move a slider; this one
does both, so a broken widget frontend, a figure that stops redrawing (see
``toy_rl.surrogate.slider_callback``) or a callback error shows up here.

Notebook 04's live run (section 13, ``toy_rl.arithmetic.views.live``) is driven the same way: move its
``c_high`` slider, press Run, and the short run it retrains from the warm start must redraw the figure and
the summary for the new bounds (:func:`test_live_run_redraws_after_run`).

Setup, all on loopback and in temporary folders (the repository is only read; screenshots go
to ``runs/browser/``, which git ignores):

* a copy of the notebook in smoke mode (``SMOKE = True`` injected as the test runner does),
  cut after the slider cell, so Run All only runs what the sliders need (notebook 04: its parameters and
  setup cells, then section 13 alone);
* JupyterLab on 127.0.0.1, a free port, a random token, its own config/data/runtime/settings
  folders (news and update checks off), shut down by the fixture whatever happens;
* Debian's Chromium (``/usr/bin/chromium``, or ``$TOY_RL_CHROMIUM``) through pip's
  ``playwright`` -- Playwright's own browser download does not work on the CI machines.
  ``scripts/install_browser.sh`` (run by ``.ci/run``) installs it. Without Chromium or
  playwright the test skips, saying which is missing.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from toy_rl.notebook_runner import parameters_index, with_smoke

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "00_clipping.ipynb"
LIVE_NOTEBOOK = ROOT / "notebooks" / "04_arithmetic_transformer.ipynb"
SHOTS = ROOT / "runs" / "browser"

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-proxy-server",
]
SERVER_START_S = 60      # JupyterLab answering /api/status
PAGE_S = 60              # the lab page and the notebook rendered
KERNEL_S = 90            # kernel started, cells run, slider shown (torch import on a busy machine)
REDRAW_S = 60            # the callback re-run after the slider moved
ARROW_PRESSES = 10       # c_high: 1.28 -> 1.38 at step 0.01

# Kernel connected and idle: the status bar reads "<kernel name> | Idle" (it reads "No Kernel | ..."
# until the session is up, while the toolbar's indicator already says idle), and nothing is queued.
KERNEL_IDLE_JS = """() => {
  const items = [...document.querySelectorAll('#jp-main-statusbar .jp-StatusBar-TextItem')].map(e => e.textContent.trim());
  const kernel = items.some(t => / [|] Idle$/.test(t) && !t.startsWith('No Kernel'));
  const s = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator');
  return kernel && s !== null && s.getAttribute('data-status') === 'idle';
}"""

def box_state_js(selector: str, extra: str = "") -> str:
    """A JS function reading the widget box ``selector``: its sliders (label, readout), its figure, its text
    output and any error; ``extra`` adds fields (JS ``key: value,`` pairs, with ``box`` in scope)."""
    return """() => {
  const box = document.querySelector('%s');
  if (box === null) return null;
  const sliders = {};
  for (const s of box.querySelectorAll('.widget-slider')) {
    const label = s.querySelector('.widget-label'), readout = s.querySelector('.widget-readout');
    if (label && readout) sliders[label.textContent.trim()] = readout.textContent.trim();
  }
  const out = box.querySelector('.widget-output');
  const img = out ? out.querySelector('img') : null;
  const pre = out ? [...out.querySelectorAll('.jp-RenderedText pre')].map(p => p.textContent).join('\\n') : '';
  const err = out ? out.querySelector('[data-mime-type="application/vnd.jupyter.stderr"]') : null;
  return {sliders, pre, %s
          img: img && img.complete && img.naturalWidth > 0 ? img.src : null,
          imgWidth: img ? img.naturalWidth : 0,
          error: err ? err.textContent.slice(0, 2000) : null};
}""" % (selector, extra)


# The interact box of the slider cell: its sliders (label, readout), its figure and its summary.
STATE_JS = box_state_js(".widget-interact")


def _open_and_run_all(page, lab) -> None:
    """Open ``lab``'s notebook, wait for its kernel (up, nothing queued), then Run → Run All Cells through the
    menu bar, as a learner would."""
    page.goto(lab.url, timeout=PAGE_S * 1000)
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=PAGE_S * 1000)
    page.wait_for_function(KERNEL_IDLE_JS, timeout=KERNEL_S * 1000)
    page.locator("#jp-MainMenu .lm-MenuBar-itemLabel").get_by_text("Run", exact=True).click()
    page.locator(".lm-Menu-content .lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()


def _chromium() -> str | None:
    for candidate in (os.environ.get("TOY_RL_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _first_sliders(nb) -> list:
    """Notebook 00: every cell up to the one that builds the sliders."""
    slider_cells = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "FloatSlider(" in c.source]
    assert slider_cells, "the notebook has no FloatSlider cell any more"
    return nb.cells[: slider_cells[0] + 1]


def _live_section(nb) -> list:
    """Notebook 04: the parameters, the injected SMOKE and the setup cell, then section 13 alone (its markdown,
    the cell that builds the baseline and the live runs, the widget's cell)."""
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    start = next((i for i in code if "live_baseline(" in nb.cells[i].source), None)
    widget = next((i for i in code if "live_widget(" in nb.cells[i].source and i != start), None)
    assert start is not None and widget is not None, "notebook 04 has no live-run section (live_baseline, live_widget)"
    head = parameters_index(nb) + 3                       # parameters, SMOKE = True, setup
    return nb.cells[:head] + nb.cells[start - 1: widget + 1]


def _smoke_copy(dest: Path, notebook: Path = NOTEBOOK, cut=_first_sliders) -> Path:
    """The notebook in smoke mode, cut to what its sliders need (``cut``: the cells kept)."""
    nb = with_smoke(nbformat.read(notebook, as_version=4))
    nb.cells = cut(nb)
    path = dest / notebook.name
    nbformat.write(nb, path)
    return path


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


class Lab:
    """A JupyterLab server on loopback, in its own folders; ``stop()`` ends it and its kernels."""

    def __init__(self, base: Path, notebook: Path = NOTEBOOK, cut=_first_sliders):
        self.base = base
        self.root = base / "notebooks"
        self.root.mkdir()
        self.notebook = _smoke_copy(self.root, notebook, cut)
        self.token = secrets.token_hex(16)
        self.port = _free_port()
        self.log = base / "jupyterlab.log"
        settings = base / "lab-settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True)
        (settings / "notification.jupyterlab-settings").write_text(
            '{"fetchNews": "false", "checkForUpdates": false, "doNotDisturbMode": true}')
        env = dict(os.environ,
                   JUPYTER_CONFIG_DIR=str(base / "config"), JUPYTER_DATA_DIR=str(base / "data"),
                   JUPYTER_RUNTIME_DIR=str(base / "runtime"),
                   JUPYTERLAB_SETTINGS_DIR=str(base / "lab-settings"),
                   JUPYTERLAB_WORKSPACES_DIR=str(base / "lab-workspaces"))
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
               "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
               "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        with open(self.log, "w") as log:
            # its own process group: stop() can end the server and the kernels it started, and only those
            self.proc = subprocess.Popen(cmd, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/lab/tree/{self.notebook.name}?reset&token={self.token}"

    def wait_ready(self, timeout: float) -> None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/status",
                                         headers={"Authorization": f"token {self.token}"})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n{_tail(self.log)}")
            try:
                with opener.open(request, timeout=3) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise TimeoutError(f"JupyterLab did not answer within {timeout:.0f} s:\n{_tail(self.log)}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)     # the server shuts its kernels down
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # whatever of its group is left (a stuck kernel)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(timeout=10)


def _serve(base: Path, **kw):
    server = Lab(base, **kw)
    try:
        server.wait_ready(SERVER_START_S)
        yield server
    finally:
        server.stop()


@pytest.fixture
def lab(tmp_path):
    yield from _serve(tmp_path)


@pytest.fixture
def live_lab(tmp_path):
    yield from _serve(tmp_path, notebook=LIVE_NOTEBOOK, cut=_live_section)


@pytest.fixture
def browser_page(tmp_path):
    chromium = _chromium()
    if chromium is None:
        pytest.skip("no Chromium (/usr/bin/chromium or $TOY_RL_CHROMIUM): run scripts/install_browser.sh")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip extra 'dev')")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=chromium, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000}, timeout=60_000)
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(30_000)
            yield page
        finally:
            context.close()


def _state(page) -> dict:
    return page.evaluate(STATE_JS) or {}


def _wait_accepting_kernel_dialog(page, predicate_js: str, timeout: float) -> None:
    """Wait for ``predicate_js``; should JupyterLab ask "Select Kernel" (a run before its session was
    up), answer it as a learner would: Select, the notebook's own kernel being preselected."""
    deadline = time.monotonic() + timeout
    dialog = page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept")
    while True:
        slice_s = min(2.0, deadline - time.monotonic())
        if slice_s <= 0:
            raise TimeoutError(f"not seen within {timeout:.0f} s: {predicate_js[:200]}")
        try:
            page.wait_for_function(predicate_js, timeout=slice_s * 1000)
            return
        except Exception as err:                           # playwright's TimeoutError
            if "Timeout" not in type(err).__name__:
                raise
        if dialog.count():
            dialog.first.click()


def test_c_high_slider_redraws_figure_and_summary(browser_page, lab):
    page = browser_page
    SHOTS.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        _open_and_run_all(page, lab)

        # The sliders, the first figure and the first summary.
        _wait_accepting_kernel_dialog(
            page, f"() => {{ const s = ({STATE_JS})(); return s !== null && s.img !== null"
                  f" && s.pre.includes(\"'c_high'\") || (s !== null && s.error !== null); }}", KERNEL_S)
        page.wait_for_function(KERNEL_IDLE_JS, timeout=KERNEL_S * 1000)
        before = _state(page)
        assert before.get("error") is None, f"the slider callback failed:\n{before['error']}"
        assert before["sliders"] == {"c_low": "0.80", "c_high": "1.28"}, before["sliders"]
        assert "'c_high': 1.28" in before["pre"], before["pre"]
        assert before["imgWidth"] > 300, "the figure did not render"
        box = page.locator(".widget-interact").first
        box.scroll_into_view_if_needed()
        box.screenshot(path=str(SHOTS / "before.png"))
        page.screenshot(path=str(SHOTS / "before_page.png"))

        # Move c_high with the keyboard: focus its noUiSlider handle, press → (one step each).
        handle = page.locator(".widget-slider", has=page.locator(".widget-label", has_text=re.compile(r"^c_high$"))
                              ).locator(".noUi-handle")
        handle.focus()
        for _ in range(ARROW_PRESSES):
            handle.press("ArrowRight")
        expected = f"{1.28 + 0.01 * ARROW_PRESSES:.2f}"
        try:
            page.wait_for_function(
                f"(want) => {{ const s = ({STATE_JS})(); return s !== null && s.sliders['c_high'] === want; }}",
                arg=expected, timeout=10_000)
        except Exception:
            raise AssertionError(f"c_high reads {_state(page).get('sliders')} after {ARROW_PRESSES} × →, "
                                 f"not {expected}") from None
        moved_to = _state(page)["sliders"]["c_high"]
        # The kernel re-ran the callback for the value the slider shows: new summary, new figure.
        page.wait_for_function(
            f"(want) => {{ const s = ({STATE_JS})(); return s !== null && (s.error !== null ||"
            f" (s.pre.includes(want) && s.img !== null)); }}",
            arg=f"'c_high': {float(moved_to)}", timeout=REDRAW_S * 1000)
        page.wait_for_function(KERNEL_IDLE_JS, timeout=REDRAW_S * 1000)
        after = _state(page)
        box.screenshot(path=str(SHOTS / "after.png"))
        page.screenshot(path=str(SHOTS / "after_page.png"))
    except Exception:
        try:
            page.screenshot(path=str(SHOTS / "failure_page.png"))
            print(f"screenshot of the failure: {SHOTS / 'failure_page.png'}")
        except Exception as err:                           # the browser itself may be gone
            print(f"no failure screenshot: {err}")
        print(f"JupyterLab log:\n{_tail(lab.log)}")
        raise
    print(f"screenshots in {SHOTS} (before.png, after.png, *_page.png); {time.monotonic() - started:.1f} s")

    assert after.get("error") is None, f"the slider callback failed:\n{after['error']}"
    assert after["sliders"]["c_low"] == "0.80"
    assert f"'c_high': {float(moved_to)}" in after["pre"] and after["pre"] != before["pre"], after["pre"]
    assert after["img"] != before["img"], "the figure did not redraw"
    assert after["imgWidth"] > 300, "the redrawn figure is empty"

    def number(text, key):
        return float(re.search(rf"'{key}': (-?[0-9.e+-]+)", text).group(1))

    # A higher c_high clips fewer positive tokens and widens the A > 0 gradient interval.
    assert number(after["pre"], "grad_width_pos") > number(before["pre"], "grad_width_pos")
    assert number(after["pre"], "clip_frac_high") <= number(before["pre"], "clip_frac_high")


# Notebook 04's live run: the box (CSS class toy-rl-live-run) of toy_rl.arithmetic.views.live.live_widget.
LIVE_KERNEL_S = 240      # Run All: torch, the tiny warm start, a short baseline of 3 rules x 2 seeds, the first run
LIVE_REDRAW_S = 90       # one short run after Run (smoke: a few updates of the tiny model) and its figure
LIVE_STATE_JS = box_state_js(".toy-rl-live-run", """
          labels: [...box.querySelectorAll('.widget-label-basic, .widget-label')].map(e => e.textContent.trim()),
          button: box.querySelector('button') ? box.querySelector('button').textContent.trim() : null,
          buttonDisabled: box.querySelector('button') ? box.querySelector('button').disabled : null,""")


def test_live_run_redraws_after_run(browser_page, live_lab):
    """Notebook 04 §13 in JupyterLab: Run All draws BAPO from [0.6, 1.2]; c_high → 1.30 with the keyboard, then
    Run: the kernel trains a new short run and the figure and the summary are redrawn for BAPO from [0.6, 1.3]."""
    page, lab = browser_page, live_lab
    SHOTS.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    want_before, want_after = "your run: bapo (ρ0 0.4, from [0.6, 1.2])", "your run: bapo (ρ0 0.4, from [0.6, 1.3])"
    try:
        _open_and_run_all(page, lab)

        # The widget with its first run (drawn from the cache: the cell before ran the same rule).
        _wait_accepting_kernel_dialog(
            page, f"() => {{ const s = ({LIVE_STATE_JS})(); return s !== null && (s.error !== null ||"
                  f" (s.img !== null && s.pre.includes({json.dumps(want_before)}))); }}", LIVE_KERNEL_S)
        page.wait_for_function(KERNEL_IDLE_JS, timeout=LIVE_KERNEL_S * 1000)
        before = page.evaluate(LIVE_STATE_JS)
        assert before.get("error") is None, f"the live run failed:\n{before['error']}"
        assert before["sliders"] == {"ρ0": "0.40", "c_low": "0.60", "c_high": "1.20"}, before["sliders"]
        assert before["imgWidth"] > 300, "the figure did not render"
        assert before["button"] == "Run" and not before["buttonDisabled"], before
        box = page.locator(".toy-rl-live-run").first
        box.scroll_into_view_if_needed()
        box.screenshot(path=str(SHOTS / "live_before.png"))

        # c_high: 1.20 -> 1.30 with the keyboard (continuous_update=False: nothing runs yet), then Run.
        label = page.locator(".widget-label", has_text=re.compile(r"^c_high$"))
        handle = page.locator(".toy-rl-live-run .widget-slider", has=label).locator(".noUi-handle")
        handle.focus()
        for _ in range(ARROW_PRESSES):
            handle.press("ArrowRight")
        try:
            page.wait_for_function(
                f"() => {{ const s = ({LIVE_STATE_JS})(); return s !== null && s.sliders['c_high'] === '1.30'; }}",
                timeout=10_000)
        except Exception:
            raise AssertionError(f"c_high reads {page.evaluate(LIVE_STATE_JS).get('sliders')} after "
                                 f"{ARROW_PRESSES} × →, not 1.30") from None
        time.sleep(0.5)                                    # the value reaches the kernel before the click does
        assert page.evaluate(LIVE_STATE_JS)["pre"] == before["pre"], "the slider alone started a run"
        box.locator("button", has_text="Run").click()
        page.wait_for_function(
            f"() => {{ const s = ({LIVE_STATE_JS})(); return s !== null && (s.error !== null ||"
            f" (s.img !== null && s.pre.includes({json.dumps(want_after)}) && s.button === 'Run'"
            f" && !s.buttonDisabled)); }}",
            timeout=LIVE_REDRAW_S * 1000)
        page.wait_for_function(KERNEL_IDLE_JS, timeout=LIVE_REDRAW_S * 1000)
        after = page.evaluate(LIVE_STATE_JS)
        box.screenshot(path=str(SHOTS / "live_after.png"))
    except Exception:
        try:
            page.screenshot(path=str(SHOTS / "live_failure_page.png"))
            print(f"screenshot of the failure: {SHOTS / 'live_failure_page.png'}")
        except Exception as err:
            print(f"no failure screenshot: {err}")
        print(f"JupyterLab log:\n{_tail(lab.log)}")
        raise
    print(f"screenshots in {SHOTS} (live_before.png, live_after.png); {time.monotonic() - started:.1f} s")

    assert after.get("error") is None, f"the live run failed:\n{after['error']}"
    assert after["sliders"] == {"ρ0": "0.40", "c_low": "0.60", "c_high": "1.30"}, after["sliders"]
    assert want_after in after["pre"] and want_before not in after["pre"], after["pre"]
    assert "trained in" in after["pre"], "the new rule came from the cache, not from a new run"
    assert after["img"] != before["img"], "the figure did not redraw"
    assert after["imgWidth"] > 300, "the redrawn figure is empty"
    assert any(t.startswith("bapo (ρ0 0.4, from [0.6, 1.3]): ") for t in after["labels"]), after["labels"]
