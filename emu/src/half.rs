//! IEEE half (f16) and bfloat16 as their bits, converted to and from f32
//! with round to nearest, ties to even: for NCCL's reductions and cuBLAS's
//! half-precision products. Written here rather than taken from a crate so
//! that the emulator keeps no dependencies beyond libc.

pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    match exp {
        0 => sign * man as f32 * (1.0 / (1u32 << 24) as f32),
        0x1f => f32::from_bits(((h as u32 & 0x8000) << 16) | 0x7f80_0000 | (man << 13)),
        _ => f32::from_bits(((h as u32 & 0x8000) << 16) | ((exp + 112) << 23) | (man << 13)),
    }
}

/// Round to nearest, ties to even.
pub(crate) fn f32_to_f16(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 0xff {
        let nan = if man != 0 { 0x200 | (man >> 13) as u16 } else { 0 };
        return sign | 0x7c00 | nan;
    }
    let e = exp - 112; // half's biased exponent
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    let (bits, rem, half) = if e >= 1 {
        (((e as u32) << 10) | (man >> 13), man & 0x1fff, 0x1000)
    } else {
        let shift = (126 - exp) as u32; // >= 14
        if shift > 24 {
            return sign;
        }
        let m = man | 0x80_0000;
        (m >> shift, m & ((1 << shift) - 1), 1 << (shift - 1))
    };
    let up = rem > half || (rem == half && bits & 1 == 1);
    sign | (bits + up as u32) as u16
}

pub(crate) fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

pub(crate) fn f32_to_bf16(f: f32) -> u16 {
    let x = f.to_bits();
    if f.is_nan() {
        return ((x >> 16) | 0x40) as u16;
    }
    ((x + 0x7fff + ((x >> 16) & 1)) >> 16) as u16
}
