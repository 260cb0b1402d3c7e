#!/usr/bin/env bash
# Install Debian's Chromium for tests/test_browser_widgets.py (the notebook sliders in a real browser).
# Idempotent and quiet; never fails: without root, apt-get or a reachable mirror it says so and exits 0,
# and the browser test then skips with its reason. Playwright's own browser download does not work
# here; the test drives /usr/bin/chromium (or $TOY_RL_CHROMIUM) through pip's `playwright` instead.
set -u
if [ -n "${TOY_RL_CHROMIUM:-}" ] && [ -x "${TOY_RL_CHROMIUM}" ]; then
  echo "install_browser: using TOY_RL_CHROMIUM=${TOY_RL_CHROMIUM}"; exit 0
fi
if command -v chromium >/dev/null 2>&1; then
  echo "install_browser: chromium already installed ($(command -v chromium))"; exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_browser: no apt-get here; browser tests will skip"; exit 0
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo -n)
  else echo "install_browser: not root and no passwordless sudo; browser tests will skip"; exit 0; fi
fi
limit=()   # bounded: an unreachable mirror must not stall CI
command -v timeout >/dev/null 2>&1 && limit=(timeout 900)
log="$(mktemp)"
if "${limit[@]}" "${sudo[@]}" apt-get update -qq >"$log" 2>&1 \
   && "${limit[@]}" "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq -o DPkg::Lock::Timeout=120 chromium >>"$log" 2>&1; then
  echo "install_browser: installed $(chromium --version 2>/dev/null | head -n1)"
else
  echo "install_browser: could not install chromium (browser tests will skip); last lines of apt-get:"
  tail -n 5 "$log" | sed 's/^/  /'
fi
rm -f "$log"
exit 0
