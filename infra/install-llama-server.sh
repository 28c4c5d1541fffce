#!/usr/bin/env bash
# Builds llama.cpp's OpenAI-compatible server (llama-cpp-python[server], an sdist that compiles llama.cpp) into a
# virtual environment in the cache outside the clone, keyed by version, so a fresh clone on the same machine does
# not build it again:
#   $cache/llama-cpp-python-<version>/   (bin/python -m llama_cpp.server)
# The Stage 1 integration test serves SmolLM2 with it (docs/operations.md, "The external analyzer").
# The build is portable (no -march=native) and uses two compile jobs; a cold build takes minutes on 2 cores.
# Idempotent: a venv whose stamp matches the version is kept, so a warm run takes well under a second.
# Prints the venv's python on stdout as its last line; progress goes to stderr.
set -euo pipefail

cache="${SEEDFLOW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/seedflow}"
version="0.3.36"
venv="$cache/llama-cpp-python-$version"
stamp="$venv/.seedflow-version"
python="$venv/bin/python"

present() { [ -x "$python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "llama-cpp-python[server]==$version" ]; }
if present; then
  echo "seedflow: llama-cpp-python $version present ($venv)" >&2
  echo "$python"
  exit 0
fi

# One build at a time (two test runs, or CI's install step and a test run, on one machine): each build starts by
# removing the venv, so a second one would pull it from under the first. The second waits, then finds it built.
mkdir -p "$cache"
exec 9>"$venv.lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
  if present; then
    echo "seedflow: llama-cpp-python $version present ($venv, built by another run meanwhile)" >&2
    echo "$python"
    exit 0
  fi
fi

base="${PYTHON:-python3}"
if ! "$base" -m venv --help >/dev/null 2>&1; then
  echo "seedflow: building llama.cpp's server needs Python 3 with venv and pip (llama-cpp-python[server]==$version from PyPI)" >&2
  exit 1
fi
for tool in cc c++; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "seedflow: building llama.cpp's server needs a C/C++ compiler ($tool; apt-get install build-essential)" >&2
    exit 1
  fi
done
# cmake and ninja come from PyPI (scikit-build-core fetches them into the isolated build when the machine has none).

echo "seedflow: building llama-cpp-python[server] $version from PyPI into $venv (compiles llama.cpp; minutes on 2 cores) ..." >&2
start=$(date +%s)
rm -rf "$venv"
mkdir -p "$cache"
"$base" -m venv "$venv"
"$python" -m pip install --quiet --upgrade pip >&2
# LLAVA_BUILD=OFF: the multimodal library (mtmd) is not needed to serve a text model, and is a large part of the build.
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DLLAMA_CURL=OFF -DLLAVA_BUILD=OFF}" \
  CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  "$python" -m pip install --no-cache-dir "llama-cpp-python[server]==$version" >&2
"$python" -c 'import llama_cpp, llama_cpp.server' >&2
echo "llama-cpp-python[server]==$version" >"$stamp"
echo "seedflow: built llama-cpp-python $version in $(($(date +%s) - start)) s -> $venv" >&2
echo "$python"
