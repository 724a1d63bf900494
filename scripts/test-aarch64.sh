#!/usr/bin/env bash
# test-aarch64.sh: cross-compiles the kernels (quantized and fp32, without OpenBLAS) and the
# self-checking driver tests/aarch64/quant_check.c for aarch64 (ARMv8.0, the Cortex-A72 boards:
# NEON without the dot-product extension) and runs it under qemu-user.  It compares the NEON
# paths with their plain-C twins bit for bit.  Exit 77 (skip) when the cross compiler or qemu
# is missing (scripts/install-deps.sh installs gcc-aarch64-linux-gnu, libc6-dev-arm64-cross,
# qemu-user).
# usage: scripts/test-aarch64.sh [OUT_DIR]   (default build/aarch64)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build/aarch64}
cc=${AARCH64_CC:-aarch64-linux-gnu-gcc}
qemu=${QEMU_AARCH64:-qemu-aarch64}
sysroot=${AARCH64_SYSROOT:-/usr/aarch64-linux-gnu}
for tool in "$cc" "$qemu"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "test-aarch64: skipped: $tool not found (scripts/install-deps.sh installs it)" >&2
        exit 77
    fi
done
if [ ! -d "$sysroot" ]; then
    echo "test-aarch64: skipped: no aarch64 libc at $sysroot (libc6-dev-arm64-cross)" >&2
    exit 77
fi
mkdir -p "$out"
bin="$out/quant_check"
# The project's warnings and exactness flags; HEADSPLIT_NO_BLAS keeps OpenBLAS out of matvec.c.
"$cc" -std=c11 -O2 -march=armv8-a -ffp-contract=off -Wall -Wextra -Wpedantic -Wshadow \
    -Wstrict-prototypes -Wmissing-prototypes -Werror -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
    -DHEADSPLIT_NO_BLAS -I"$root/include/util" -I"$root/include/kernels" \
    "$root/tests/aarch64/quant_check.c" "$root"/src/kernels/*.c "$root/src/util/util.c" \
    -lm -o "$bin"
echo "test-aarch64: running $bin under $qemu" >&2
exec "$qemu" -L "$sysroot" "$bin"
