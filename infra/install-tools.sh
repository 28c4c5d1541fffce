#!/usr/bin/env bash
# Builds the servers the project runs against into a git-ignored tools folder (.tools/bin by default):
#   temporal   Temporal CLI with the dev server (SQLite state, Web UI)   github.com/temporalio/cli v1.5.1
#   versitygw  S3-compatible gateway over a POSIX folder                 github.com/versity/versitygw v1.7.0
# Idempotent: a binary whose recorded version matches is kept, so a warm run takes well under a second. A built
# binary is also kept in the cache outside the clone ($SEEDFLOW_CACHE_DIR/tools/<name>-<version>), so a fresh clone
# copies it instead of asking the proxy again (`go install pkg@version` queries the proxy for the package's module
# even when the module cache holds it, and a proxy outage then fails a warm run).
# Both come from the Go module proxy (no other download); Go >= 1.25 is needed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${SEEDFLOW_TOOLS_DIR:-$root/.tools}"
bin="$tools/bin"
mkdir -p "$bin"
cache="${SEEDFLOW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/seedflow}/tools"

# name|go package|version
TOOLS=(
  "temporal|github.com/temporalio/cli/cmd/temporal|v1.5.1"
  "versitygw|github.com/versity/versitygw/cmd/versitygw|v1.7.0"
)

need_go() {
  if ! command -v go >/dev/null 2>&1; then
    cat >&2 <<MSG
seedflow: Go is not installed, and it is needed to build the local servers (Temporal CLI, versitygw).
  Install Go >= 1.25 (https://go.dev/dl/, or your package manager: 'apt-get install golang-1.25', 'brew install go'),
  then rerun: bash infra/install-tools.sh
  Or point seedflow at binaries you already have: SEEDFLOW_TEMPORAL_BIN=/path/to/temporal SEEDFLOW_S3_SERVER_BIN=/path/to/versitygw
MSG
    exit 1
  fi
  local have
  have="$(go env GOVERSION | sed 's/^go//')"
  if [ "$(printf '%s\n1.25\n' "$have" | sort -V | head -n1)" != "1.25" ]; then
    echo "seedflow: Go $have is too old to build the servers; install Go >= 1.25." >&2
    exit 1
  fi
}

for entry in "${TOOLS[@]}"; do
  IFS='|' read -r name pkg version <<<"$entry"
  stamp="$bin/.$name.version"
  if [ -x "$bin/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$pkg@$version" ]; then
    echo "seedflow: $name $version present ($bin/$name)"
    continue
  fi
  cached="$cache/$name-$version/$name"
  if [ -x "$cached" ]; then
    cp "$cached" "$bin/$name.tmp" && mv "$bin/$name.tmp" "$bin/$name"
    echo "$pkg@$version" >"$stamp"
    echo "seedflow: $name $version from the cache ($cached)"
    continue
  fi
  need_go
  echo "seedflow: building $name $version from the Go module proxy (a cold build takes minutes on 2 cores)..."
  start=$(date +%s)
  GOBIN="$bin" GOFLAGS="${GOFLAGS:-} -trimpath" go install "$pkg@$version"
  echo "$pkg@$version" >"$stamp"
  mkdir -p "$cache/$name-$version"
  cp "$bin/$name" "$cached.tmp" && mv "$cached.tmp" "$cached"
  echo "seedflow: built $name $version in $(($(date +%s) - start)) s -> $bin/$name (kept in $cached)"
done
