#!/usr/bin/env bash
# ONNX Runtime's CUDA provider for onnxruntime-node, from PyPI (onnxruntime-node's own installer fetches it from
# NuGet, which the machines seedflow builds on cannot reach; docs/operations.md §8). Into a cache outside the clone,
# keyed by version:
#   $cache/onnxruntime-gpu-<ver>/   the `onnxruntime-gpu==<ver>` wheel's libonnxruntime.so.<ver> (as
#                                   libonnxruntime.so.1, the name the binding asks for), libonnxruntime_providers_
#                                   shared.so and libonnxruntime_providers_cuda.so (built for CUDA 13), where <ver>
#                                   is exactly the installed onnxruntime-node's version;
#   $cache/cuda13-runtime-<tag>/lib the CUDA 13 runtime libraries the provider loads (cuBLAS, cudart, cuRAND, cuFFT,
#                                   cuDNN 9, nvrtc; PyPI's NVIDIA wheels, ~1.2 GB), only where they are wanted:
#   --runtime=auto (default)  fetch them on a machine with an NVIDIA driver (libcuda.so.1) that lacks one of them;
#   --runtime=yes / no        always / never.
# A CUDA worker (`seedflow worker --execution-provider cuda`) puts these folders first on LD_LIBRARY_PATH and runs
# itself again, so the binding loads the wheel's library and its providers; nothing is written into
# node_modules (`npm ci` would undo it). Idempotent: a folder whose files match their recorded sha256 is kept.
# Prints the provider's folder on stdout as its last line; progress goes to stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

runtime=auto
for arg in "$@"; do
  case "$arg" in
  --runtime=auto | --runtime=yes | --runtime=no) runtime="${arg#--runtime=}" ;;
  -h | --help)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "seedflow: install-cuda.sh: unknown argument $arg (--runtime=auto|yes|no)" >&2
    exit 2
    ;;
  esac
done

say() { echo "seedflow: $*" >&2; }
scratch=()
trap 'rm -rf "${scratch[@]}"' EXIT
cache="${SEEDFLOW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/seedflow}"
python="${PYTHON:-python3}"
# the installed onnxruntime-node's version, else the one package-lock.json makes `npm ci` install
version="$(node -p "require('./node_modules/onnxruntime-node/package.json').version" 2>/dev/null ||
  node -p "require('./package-lock.json').packages['node_modules/onnxruntime-node'].version" 2>/dev/null || true)"
if [ -z "$version" ]; then
  say "cannot tell the onnxruntime-node version (no node_modules/onnxruntime-node, none in package-lock.json)"
  exit 1
fi

# The wheel of each onnxruntime-node version this script knows (PyPI's sha256): a new version is added here after
# it has been checked (gpu-notes: the binding uses only ORT's C API, so the wheel's library must be the same version).
case "$version" in
1.30.0) wheel_sha256="6acc0f4b3d5ac5f2984432faa59dd8fcce6775f8b43a7140afa0f322c7a703b1" ;;
*)
  say "no onnxruntime-gpu wheel is recorded for onnxruntime-node $version (infra/install-cuda.sh knows 1.30.0)"
  exit 1
  ;;
esac
# The CUDA 13 runtime the provider of 1.30.0 was built for (its wheel's `cuda` and `cudnn` extras), pinned.
runtime_pins=(nvidia-cublas==13.10.0.20 nvidia-cuda-runtime==13.5.37 nvidia-cufft==12.5.0.14
  nvidia-curand==10.4.5.25 nvidia-cuda-nvrtc==13.5.37 nvidia-cudnn-cu13==9.28.1.4)
runtime_libs=(libcublasLt.so.13 libcublas.so.13 libcudart.so.13 libcurand.so.10 libcufft.so.12 libcudnn.so.9
  libnvrtc.so.13)

need_pip() {
  if ! "$python" -m pip --version >/dev/null 2>&1; then
    say "fetching the CUDA provider needs Python 3 with pip (it comes from PyPI: $1)"
    exit 1
  fi
}

# files of a folder whose sha256 list (SHA256SUMS, written last) still holds
complete() { [ -f "$1/SHA256SUMS" ] && (cd "$1" && sha256sum --quiet --check SHA256SUMS >/dev/null 2>&1); }

ort_dir="$cache/onnxruntime-gpu-$version"
if complete "$ort_dir"; then
  say "onnxruntime-gpu $version present ($ort_dir)"
else
  need_pip "onnxruntime-gpu==$version"
  say "fetching onnxruntime-gpu $version from PyPI (247 MB) into $ort_dir ..."
  start=$(date +%s)
  mkdir -p "$cache"
  work="$(mktemp -d "$cache/.fetch.XXXXXX")"
  scratch+=("$work")
  "$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --dest "$work" "onnxruntime-gpu==$version" >&2
  whl="$(ls "$work"/onnxruntime_gpu-*.whl)"
  got="$(sha256sum "$whl" | cut -d' ' -f1)"
  if [ "$got" != "$wheel_sha256" ]; then
    say "$(basename "$whl") has sha256 $got, expected $wheel_sha256; not installed"
    exit 1
  fi
  mkdir -p "$work/lib"
  "$python" - "$whl" "$work/lib" "$version" <<'PY'
import shutil, sys, zipfile
wheel, dest, version = sys.argv[1:]
names = {
    f"onnxruntime/capi/libonnxruntime.so.{version}": "libonnxruntime.so.1",
    "onnxruntime/capi/libonnxruntime_providers_shared.so": "libonnxruntime_providers_shared.so",
    "onnxruntime/capi/libonnxruntime_providers_cuda.so": "libonnxruntime_providers_cuda.so",
}
with zipfile.ZipFile(wheel) as z:
    for member, name in names.items():
        with z.open(member) as src, open(f"{dest}/{name}", "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
  (cd "$work/lib" && sha256sum -- *.so* >SHA256SUMS)
  rm -rf "$ort_dir"
  mv "$work/lib" "$ort_dir"
  say "installed onnxruntime-gpu $version in $(($(date +%s) - start)) s -> $ort_dir"
fi

# The runtime: wanted where a driver is and a library is missing (or when asked).
found() {
  ldconfig -p 2>/dev/null | grep -qE "^[[:space:]]+${1//./\\.} " && return 0
  local dirs d
  IFS=: read -ra dirs <<<"${LD_LIBRARY_PATH:-}"
  for d in "${dirs[@]}"; do [ -n "$d" ] && [ -e "$d/$1" ] && return 0; done
  return 1
}
tag="$(printf '%s\n' "${runtime_pins[@]}" | sha256sum | cut -c1-12)"
runtime_dir="$cache/cuda13-runtime-$tag"
if [ "$runtime" = auto ]; then
  runtime=no
  if found libcuda.so.1; then
    for lib in "${runtime_libs[@]}"; do found "$lib" || runtime=yes; done
    [ "$runtime" = no ] && say "the CUDA 13 runtime libraries are on this machine already"
  else
    say "no NVIDIA driver here (libcuda.so.1): the CUDA 13 runtime is not fetched (--runtime=yes fetches it)"
  fi
fi
if [ "$runtime" = yes ]; then
  if complete "$runtime_dir/lib"; then
    say "CUDA 13 runtime present ($runtime_dir/lib)"
  else
    need_pip "${runtime_pins[*]}"
    say "fetching the CUDA 13 runtime from PyPI (~1.2 GB: ${runtime_pins[*]}) into $runtime_dir ..."
    start=$(date +%s)
    work="$(mktemp -d "$cache/.fetch.XXXXXX")"
    scratch+=("$work")
    # NVIDIA tags its wheels with several manylinux levels, and pip matches --platform exactly: name them all
    platforms=()
    for p in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux_2_12 manylinux2010 manylinux_2_5 \
      manylinux1; do platforms+=(--platform "${p}_x86_64"); done
    "$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 "${platforms[@]}" \
      --dest "$work" "${runtime_pins[@]}" >&2
    mkdir -p "$work/lib"
    "$python" - "$work/lib" "$work"/*.whl <<'PY'
import os, shutil, sys, zipfile
dest = sys.argv[1]
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            name = os.path.basename(member)
            if "/lib/" in member and ".so" in name:
                with z.open(member) as src, open(os.path.join(dest, name), "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
PY
    (cd "$work/lib" && sha256sum -- *.so* >SHA256SUMS)
    rm -rf "$runtime_dir"
    mkdir -p "$runtime_dir"
    mv "$work/lib" "$runtime_dir/lib"
    say "installed the CUDA 13 runtime in $(($(date +%s) - start)) s -> $runtime_dir/lib"
  fi
fi
echo "$ort_dir"
