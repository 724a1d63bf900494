#!/usr/bin/env bash
# Installs everything HeadSplit needs to build, run and test, from Debian packages.
set -euo pipefail
PKGS=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libopenblas-dev
      libhdf5-dev hdf5-tools libcmocka-dev libjansson-dev libpcre2-dev jq gnuplot-nox
      gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user  # NEON kernels under qemu
      python3                                                 # scripts/check_layering.py
      libmicrohttpd-dev                                       # headsplit --serve
      tmux curl nodejs npm
      time)                                                   # /usr/bin/time: peak RSS in tests
# tmux: the --chat test; curl, nodejs, npm: the --serve test and tests/integration/
# tokenizers_hf.sh, with the npm packages of tests/node (the openai client, JavaScript
# Hugging Face tokenizers) installed below from its package-lock.json.
missing=()
for p in "${PKGS[@]}"; do
  # node and npm installed otherwise (NodeSource's nodejs bundles npm) count as present
  case $p in nodejs) command -v node >/dev/null && continue ;;
             npm) command -v npm >/dev/null && continue ;; esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all Debian packages present"
else
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The tests' npm packages, exactly as locked; again only when the lock file changed.
NODE_DIR="$(cd "$(dirname "$0")/.." && pwd)/tests/node"
if ! cmp -s "$NODE_DIR/package-lock.json" "$NODE_DIR/node_modules/.headsplit-lock"; then
  echo "install-deps: npm ci in tests/node"
  (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$NODE_DIR/package-lock.json" "$NODE_DIR/node_modules/.headsplit-lock"
fi
