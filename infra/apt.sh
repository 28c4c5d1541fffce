# Sourced by the install scripts whose program comes from Debian's packages (install-chromium.sh,
# install-vulkan.sh). `ensure_from_apt WHAT FIND HINT ARGS...`: when the function FIND prints a path, says WHAT is
# present and prints that path as the last line on stdout; else, as root with apt-get, runs the function
# `before_apt` when the script defines one (an extra package source), apt-get update and apt-get install ARGS, and
# finds again; without root or apt-get it says HINT and fails.
ensure_from_apt() {
  local what=$1 find=$2 hint=$3
  shift 3
  local found start
  if found="$("$find")"; then
    echo "seedflow: $what present ($found)" >&2
    echo "$found"
    return 0
  fi
  if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "seedflow: $hint" >&2
    return 1
  fi
  echo "seedflow: installing $what (apt-get install $*) ..." >&2
  start=$(date +%s)
  export DEBIAN_FRONTEND=noninteractive
  if declare -F before_apt >/dev/null; then before_apt; fi
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "$@" >&2
  found="$("$find")" || { echo "seedflow: still no $what after apt-get install $*" >&2; return 1; }
  echo "seedflow: $what installed in $(( $(date +%s) - start )) s ($found)" >&2
  echo "$found"
}
