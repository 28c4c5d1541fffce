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

if browser="$(find_browser)"; then
  echo "seedflow: chromium present ($browser)" >&2
  echo "$browser"
  exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "seedflow: the browser tests need Chromium: install the Debian package (sudo apt-get install chromium) or set SEEDFLOW_CHROMIUM to a Chromium binary" >&2
  exit 1
fi
echo "seedflow: installing Debian's chromium package for the browser tests ..." >&2
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends chromium >&2
browser="$(find_browser)" || { echo "seedflow: chromium is still not on PATH after apt-get install" >&2; exit 1; }
echo "seedflow: chromium installed in $(( $(date +%s) - start )) s ($browser)" >&2
echo "$browser"
