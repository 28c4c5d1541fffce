#!/usr/bin/env bash
# Ensures a Vulkan driver without a GPU: Mesa's lavapipe (software Vulkan on the CPU), over which the WebGPU
# execution provider that onnxruntime-node bundles runs, so that the tests exercise a real device provider on
# machines with no GPU (the CPU-fallback guard: engine/cpu-fallback.ts). ORT's WebGPU provider (Dawn) needs Mesa 24
# or later; Debian bookworm has 22.3, its bookworm-backports 25 (Debian packages: the package registries are the
# only network CI has). apt-get, as root; idempotent: with lavapipe ≥ 24 present it installs nothing. Prints the
# path of lavapipe's ICD file (what VK_ICD_FILENAMES names) on stdout as its last line.
set -euo pipefail

MIN_MESA=24
icd_dir=/usr/share/vulkan/icd.d

find_icd() {
  if [ -n "${SEEDFLOW_VULKAN_ICD:-}" ] && [ -f "$SEEDFLOW_VULKAN_ICD" ]; then echo "$SEEDFLOW_VULKAN_ICD"; return 0; fi
  local version
  version="$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)"
  [ -n "$version" ] && [ "${version%%.*}" -ge "$MIN_MESA" ] || return 1
  [ -f /usr/lib/x86_64-linux-gnu/libvulkan.so.1 ] || [ -f /usr/lib/aarch64-linux-gnu/libvulkan.so.1 ] || return 1
  for f in "$icd_dir"/lvp_icd*.json; do [ -f "$f" ] && { echo "$f"; return 0; }; done
  return 1
}

target=()
# shellcheck disable=SC1091
if [ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" = "bookworm" ]; then target=(-t bookworm-backports); fi
before_apt() {
  [ "${#target[@]}" -gt 0 ] || return 0
  grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/ ||
    echo "deb http://deb.debian.org/debian bookworm-backports main" >/etc/apt/sources.list.d/seedflow-bookworm-backports.list
}

# shellcheck source=infra/apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
ensure_from_apt "Mesa's software Vulkan (lavapipe ≥ $MIN_MESA)" find_icd \
  "the device-provider tests need Mesa's lavapipe ≥ $MIN_MESA (Debian: apt-get install -t bookworm-backports mesa-vulkan-drivers libvulkan1) or SEEDFLOW_VULKAN_ICD naming a Vulkan ICD file" \
  "${target[@]}" mesa-vulkan-drivers libvulkan1
