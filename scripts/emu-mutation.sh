#!/usr/bin/env bash
# Mutation check on the emulated GPU: breaks one kernel on purpose in a copy of
# the kernel folder, builds the emulator from that copy (the PTX side is
# unchanged, so only what the kernel computes differs), and runs a test
# command on it. Succeeds only if the command FAILS, i.e. the tests notice.
#
#   bash scripts/emu-mutation.sh kernels/binary.cu 's/dt_add(a, b)/dt_sub(a, b)/' -- cargo test --test ops binary::
#
# A file of src/ (the library's host code) is mutated in place instead, and
# restored when the command ends, to show that the emulator catches a
# mistake there: a synchronisation removed, for one. The two the
# distributed suite must catch (the communication stream's wait for the
# gradients, and the compute stream's wait for the sums):
#   bash scripts/emu-mutation.sh src/backend/cuda/nccl.rs \
#        '/self.stream.wait(&computed)/s/^/\/\/ /' -- \
#        env DEVTENSOR_REQUIRE_CUDA=1 cargo test --test training distributed::processes_train
#   bash scripts/emu-mutation.sh src/parallel/distributed.rs \
#        '/^        comm.finish()?;/s/^/\/\/ /' -- \
#        env DEVTENSOR_REQUIRE_CUDA=1 cargo test --test training distributed::processes_train
#
# Cargo puts its own target folder first on the library path of the tests it
# runs, so the emulator's own tests must run from the mutated build's folder:
#   bash scripts/emu-mutation.sh emu/tests/kernels/emutest.cu '0,/+ y\[i\]/s//- y[i]/' -- \
#        env CARGO_TARGET_DIR=emu/target/mutation cargo test --manifest-path emu/Cargo.toml --test driver grid_stride
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 4 ] || [ "$3" != "--" ]; then
    echo "usage: $0 <kernel or src/ file> <sed expression> -- <test command...>" >&2
    exit 2
fi
file=$1
expr=$2
shift 3

if [[ "$file" == src/* ]]; then
    backup=$(mktemp)
    cp "$file" "$backup"
    trap 'cp "$backup" "$file"; rm -f "$backup"' EXIT
    sed -i -e "$expr" "$file"
    if cmp -s "$file" "$backup"; then
        echo "the sed expression changed nothing in $file" >&2
        exit 2
    fi
    echo "== mutation of $file (restored afterwards):"
    diff -u "$backup" "$file" || true
    if bash scripts/with-emu.sh "$@"; then
        echo "== MUTATION SURVIVED: the tests passed with the change" >&2
        exit 1
    fi
    echo "== mutation detected: the tests failed, as they must"
    exit 0
fi

dir=$(dirname "$file")
case "$dir" in
    kernels) var=DEVTENSOR_EMU_KERNELS_DIR ;;
    emu/tests/kernels) var=DEVTENSOR_EMU_TEST_KERNELS_DIR ;;
    *) echo "the file must be in kernels/, emu/tests/kernels/ or src/" >&2; exit 2 ;;
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
