#!/usr/bin/env bash
# Mutation check on the emulated GPU: breaks one kernel on purpose in a copy of
# the kernel folder, builds the emulator from that copy (the PTX side is
# unchanged, so only what the kernel computes differs), and runs a test
# command on it. Succeeds only if the command FAILS, i.e. the tests notice.
#
#   bash scripts/emu-mutation.sh kernels/binary.cu 's/a + b/a - b/' -- cargo test --test cuda
#
# Cargo puts its own target folder first on the library path of the tests it
# runs, so the emulator's own tests must run from the mutated build's folder:
#   bash scripts/emu-mutation.sh emu/tests/kernels/emutest.cu '0,/+ y\[i\]/s//- y[i]/' -- \
#        env CARGO_TARGET_DIR=emu/target/mutation cargo test --manifest-path emu/Cargo.toml --test driver grid_stride
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 4 ] || [ "$3" != "--" ]; then
    echo "usage: $0 <kernel file> <sed expression> -- <test command...>" >&2
    exit 2
fi
file=$1
expr=$2
shift 3

dir=$(dirname "$file")
case "$dir" in
    kernels) var=DEVTENSOR_EMU_KERNELS_DIR ;;
    emu/tests/kernels) var=DEVTENSOR_EMU_TEST_KERNELS_DIR ;;
    *) echo "the kernel must be in kernels/ or emu/tests/kernels/" >&2; exit 2 ;;
esac

copy="$PWD/emu/target/mutation/kernels"
rm -rf "$copy"
mkdir -p "$copy"
cp -r "$dir"/. "$copy"/
sed -i -e "$expr" "$copy/$(basename "$file")"
if cmp -s "$file" "$copy/$(basename "$file")"; then
    echo "the sed expression changed nothing in $file" >&2
    exit 2
fi
echo "== mutation of $file:"
diff -u "$file" "$copy/$(basename "$file")" || true

export "$var=$copy"
export EMU_TARGET_DIR="$PWD/emu/target/mutation"
if bash scripts/with-emu.sh "$@"; then
    echo "== MUTATION SURVIVED: the tests passed with a broken kernel" >&2
    exit 1
fi
echo "== mutation detected: the tests failed, as they must"
