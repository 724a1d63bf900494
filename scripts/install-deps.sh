#!/usr/bin/env bash
# Installs everything HeadSplit needs to build, run and test, from Debian packages.
set -euo pipefail
PKGS=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libopenblas-dev
      libhdf5-dev hdf5-tools libcmocka-dev libjansson-dev libpcre2-dev jq gnuplot-nox
      gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
      libmicrohttpd-dev tmux curl nodejs npm)
# libmicrohttpd-dev: headsplit --serve; tmux: the --chat test; curl, nodejs, npm: the --serve
# test (the openai npm package is installed into a cache at test time).  Where nodejs comes
# from NodeSource its npm is bundled: the npm package is then skipped.
if command -v npm >/dev/null 2>&1; then
  PKGS=("${PKGS[@]/npm/}")
fi
missing=()
for p in "${PKGS[@]}"; do
  [ -n "$p" ] || continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
