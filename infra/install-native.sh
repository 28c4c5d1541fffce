#!/usr/bin/env bash
# Builds seedflow's native engine backend (native/seedflow-ort: a Rust N-API addon over ONNX Runtime's C API) with
# cargo, from crates.io (Cargo.lock pins every crate), into the cache outside the clone, keyed by the sha256 of its
# sources: ~/.cache/seedflow/native-<key>/seedflow_ort.node. Idempotent: with that file present it builds nothing.
# `--path` prints the path without building. Prints the addon's path on stdout as its last line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

crate=native/seedflow-ort
cache="${SEEDFLOW_CACHE:-$HOME/.cache/seedflow}"
key="$( (cd "$crate" && find Cargo.toml Cargo.lock build.rs src -type f | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -c1-16)"
out="$cache/native-$key"
addon="$out/seedflow_ort.node"

if [ "${1:-}" = "--path" ]; then echo "$addon"; exit 0; fi
if [ -f "$addon" ]; then
  echo "seedflow: native engine present ($addon)" >&2
  echo "$addon"
  exit 0
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "seedflow: building the native engine needs Rust's cargo (rustup: https://rustup.rs, or Debian's cargo ≥ 1.85); none is on PATH" >&2
  exit 1
fi
echo "seedflow: building the native engine (cargo build --release, $(cargo --version)) ..." >&2
start=$(date +%s)
target="$cache/native-target"
CARGO_TARGET_DIR="$target" cargo build --release --locked --manifest-path "$crate/Cargo.toml" >&2
mkdir -p "$out"
cp "$target/release/libseedflow_ort.so" "$addon.tmp"
mv "$addon.tmp" "$addon"
echo "seedflow: native engine built in $(( $(date +%s) - start )) s ($addon)" >&2
echo "$addon"
