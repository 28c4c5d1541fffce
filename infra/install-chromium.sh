#!/usr/bin/env bash
# Ensures the headless browser the report tests open pages in: Debian's `chromium` package (apt-get, as root;
# the package registries are the only network CI has). Idempotent: with a Chromium on PATH (or
# SEEDFLOW_CHROMIUM) it installs nothing. Prints the browser's path on stdout as its last line.
set -euo pipefail

find_browser() {
  if [ -n "${SEEDFLOW_CHROMIUM:-}" ] && [ -x "$SEEDFLOW_CHROMIUM" ]; then echo "$SEEDFLOW_CHROMIUM"; return 0; fi
  for name in chromium chromium-browser google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
  done
  return 1
}

# shellcheck source=infra/apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
ensure_from_apt chromium find_browser \
  "the browser tests need Chromium: install the Debian package (sudo apt-get install chromium) or set SEEDFLOW_CHROMIUM to a Chromium binary" \
  chromium
