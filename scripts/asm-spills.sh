#!/usr/bin/env bash
# Lists the functions of a built binary in which a vector multiply-add's
# result is stored to the stack by the very next instruction, at least
# MIN times (4 unless given): the sign of accumulators that the compiler
# keeps in registers but also spills on every turn of a loop. The direct
# convolution kernels did that until 249463c (16 stores to 16 FMAs, which
# halved their speed); `perf` shows it only as time spread over the loop.
#
#   bash scripts/asm-spills.sh benches/peers/target/release/devtensor-peers [MIN]
#
# Prints "count function" per line, most first, and nothing when no function
# does it. Needs objdump (binutils).
set -euo pipefail
binary=${1:?usage: asm-spills.sh BINARY [MIN]}
min=${2:-4}
objdump -d --no-show-raw-insn -C "$binary" | awk -v min="$min" '
/^[0-9a-f]+ <.*>:$/ { name = $0; prev = ""; next }
{
    split($0, cols, "\t"); ins = cols[2]
    if (ins ~ /^vmov(aps|ups) +%[xyz]mm[0-9]+,(-?0x[0-9a-f]+)?\(%rsp/ && prev ~ /^vfn?m(add|sub)/) {
        split(ins, ops, /[ ,]+/); reg = ops[2]
        # The store writes the register the multiply-add just wrote (its last operand).
        if (substr(prev, length(prev) - length(reg) + 1) == reg) count[name]++
    }
    prev = ins
}
END { for (f in count) if (count[f] >= min) print count[f], substr(f, 1, 160) }
' | sort -rn
