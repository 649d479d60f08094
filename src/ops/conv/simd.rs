//! The vector registers the direct convolution kernels are written over:
//! 16 `f32` lanes with AVX-512, 8 with AVX2, FMA and F16C. The kernels in
//! [`super::direct`] are generic over [`Vector`] and `#[inline(always)]`;
//! each instruction set has an entry point with its `#[target_feature]`, into
//! which the kernel and these methods inline, so that one kernel compiles
//! to each instruction set's code.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// One vector register of `f32` lanes and the operations the direct
/// kernels use on it.
///
/// # Safety
///
/// Every method requires the CPU to support the implementation's
/// instruction set, and runs at full speed only inlined into a function
/// that enables it (`#[target_feature]`). Loads and stores read and write
/// the lanes they name, which must be inside one allocation.
pub(super) trait Vector: Copy {
    /// `f32` lanes per register.
    const LANES: usize;
    /// Which lanes a masked load or store touches.
    type Mask: Copy;
    /// `LANES` registers, a square tile for [`Vector::transpose`].
    type Tile: Copy + AsRef<[Self]> + AsMut<[Self]>;

    /// Every lane 0.
    unsafe fn zero() -> Self;
    /// Every lane `v`.
    unsafe fn splat(v: f32) -> Self;
    /// `a · b + c` in each lane, rounded once.
    unsafe fn mul_add(a: Self, b: Self, c: Self) -> Self;
    /// `a + b` in each lane.
    unsafe fn add(a: Self, b: Self) -> Self;
    /// `LANES` elements from `p`.
    unsafe fn load(p: *const f32) -> Self;
    /// Writes every lane to `p..p + LANES`.
    unsafe fn store(p: *mut f32, v: Self);
    /// The first `min(len, LANES)` lanes.
    unsafe fn mask(len: usize) -> Self::Mask;
    /// The mask's lanes from `p` on, 0 elsewhere; lanes outside the mask
    /// read nothing.
    unsafe fn load_masked(p: *const f32, mask: Self::Mask) -> Self;
    /// Writes the mask's lanes to `p` on; lanes outside it write nothing.
    unsafe fn store_masked(p: *mut f32, mask: Self::Mask, v: Self);
    /// A tile of zeros.
    unsafe fn zero_tile() -> Self::Tile;
    /// The transpose of the square matrix whose rows are `rows`.
    unsafe fn transpose(rows: Self::Tile) -> Self::Tile;
    /// Each lane rounded to the nearest `bf16` (ties to even), as an `f32`:
    /// `bf16::from_f32(v).to_f32()` bit for bit, NaNs made quiet as
    /// `half` makes them.
    unsafe fn round_bf16(v: Self) -> Self;
    /// Each lane rounded to the nearest `f16` (ties to even; overflow to
    /// infinity, subnormals kept), as an `f32`: `f16::from_f32(v).to_f32()`
    /// bit for bit, by the CPU's own conversion (`vcvtps2ph`, F16C).
    unsafe fn round_f16(v: Self) -> Self;
    /// Each lane rounded to `to`.
    #[inline(always)]
    unsafe fn round_to(v: Self, to: Rounding) -> Self {
        // SAFETY: the trait's contract.
        unsafe {
            match to {
                Rounding::Bf16 => Self::round_bf16(v),
                Rounding::F16 => Self::round_f16(v),
            }
        }
    }
}

/// The half type a kernel rounds its values to, kept in `f32` storage:
/// what `autocast`'s casts would round them to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rounding {
    /// To `bf16`.
    Bf16,
    /// To `f16`.
    F16,
}

impl Rounding {
    /// `v` rounded as [`Vector::round_to`] rounds a lane: for the few
    /// values rounded one at a time.
    pub(super) fn scalar(self, v: f32) -> f32 {
        match self {
            Rounding::Bf16 => half::bf16::from_f32(v).to_f32(),
            Rounding::F16 => half::f16::from_f32(v).to_f32(),
        }
    }
}

/// The `f32` bits of `bf16` rounding, on integers: adding `0x7fff` plus
/// the lowest kept bit carries into the kept bits exactly when the dropped
/// half is above a tie, or a tie with an odd kept part (ties to even); a
/// NaN keeps its top bits with the quiet bit set instead.
const BF16_KEPT: i32 = 0xffff_0000_u32 as i32;
/// See [`BF16_KEPT`].
const BF16_QUIET: i32 = 0x0040_0000;

/// A 512-bit register (AVX-512F).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) struct Avx512(__m512);

#[cfg(target_arch = "x86_64")]
impl Vector for Avx512 {
    const LANES: usize = 16;
    type Mask = __mmask16;
    type Tile = [Avx512; 16];

    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe { Avx512(_mm512_setzero_ps()) }
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe { Avx512(_mm512_set1_ps(v)) }
    }
    #[inline(always)]
    unsafe fn mul_add(a: Self, b: Self, c: Self) -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe { Avx512(_mm512_fmadd_ps(a.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe { Avx512(_mm512_add_ps(a.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set, the lanes are in bounds).
        unsafe { Avx512(_mm512_loadu_ps(p)) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        // SAFETY: the trait's contract (the CPU has the instruction set, the lanes are in bounds).
        unsafe { _mm512_storeu_ps(p, v.0) }
    }
    #[inline(always)]
    unsafe fn mask(len: usize) -> Self::Mask {
        if len >= 16 { u16::MAX } else { (1u16 << len) - 1 }
    }
    #[inline(always)]
    unsafe fn load_masked(p: *const f32, mask: Self::Mask) -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set, the enabled lanes are in bounds); masked-off lanes do not fault.
        unsafe { Avx512(_mm512_maskz_loadu_ps(mask, p)) }
    }
    #[inline(always)]
    unsafe fn store_masked(p: *mut f32, mask: Self::Mask, v: Self) {
        // SAFETY: the trait's contract (the CPU has the instruction set, the enabled lanes are in bounds); masked-off lanes do not fault.
        unsafe { _mm512_mask_storeu_ps(p, mask, v.0) }
    }
    #[inline(always)]
    unsafe fn zero_tile() -> Self::Tile {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe { [Avx512(_mm512_setzero_ps()); 16] }
    }
    #[inline(always)]
    unsafe fn round_bf16(v: Self) -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe {
            let bits = _mm512_castps_si512(v.0);
            let odd = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
            let carried = _mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
            let rounded = _mm512_and_si512(carried, _mm512_set1_epi32(BF16_KEPT));
            let quiet =
                _mm512_and_si512(_mm512_or_si512(bits, _mm512_set1_epi32(BF16_QUIET)), _mm512_set1_epi32(BF16_KEPT));
            let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v.0, v.0);
            Avx512(_mm512_castsi512_ps(_mm512_mask_blend_epi32(nan, rounded, quiet)))
        }
    }
    #[inline(always)]
    unsafe fn round_f16(v: Self) -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe { Avx512(_mm512_cvtph_ps(_mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v.0))) }
    }
    /// Pairs of rows interleaved by 32 and then 64 bits give, in each
    /// 128-bit lane, four rows of one column; two rounds of lane shuffles
    /// gather each column's four lanes.
    #[inline(always)]
    unsafe fn transpose(rows: Self::Tile) -> Self::Tile {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe {
            let r = rows.map(|v| v.0);
            let mut t = [_mm512_setzero_ps(); 16];
            for q in 0..4 {
                let (a, b, c, d) = (r[4 * q], r[4 * q + 1], r[4 * q + 2], r[4 * q + 3]);
                let (ab_lo, ab_hi) =
                    (_mm512_castps_pd(_mm512_unpacklo_ps(a, b)), _mm512_castps_pd(_mm512_unpackhi_ps(a, b)));
                let (cd_lo, cd_hi) =
                    (_mm512_castps_pd(_mm512_unpacklo_ps(c, d)), _mm512_castps_pd(_mm512_unpackhi_ps(c, d)));
                // t[4q + j], lane k: column 4k + j of rows 4q..4q + 4.
                t[4 * q] = _mm512_castpd_ps(_mm512_unpacklo_pd(ab_lo, cd_lo));
                t[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(ab_lo, cd_lo));
                t[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(ab_hi, cd_hi));
                t[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(ab_hi, cd_hi));
            }
            let mut out = [Avx512(_mm512_setzero_ps()); 16];
            for j in 0..4 {
                // Lanes 0-1 (then 2-3) of the four row groups, then every other lane.
                let low =
                    (_mm512_shuffle_f32x4::<0x44>(t[j], t[4 + j]), _mm512_shuffle_f32x4::<0x44>(t[8 + j], t[12 + j]));
                let high =
                    (_mm512_shuffle_f32x4::<0xee>(t[j], t[4 + j]), _mm512_shuffle_f32x4::<0xee>(t[8 + j], t[12 + j]));
                out[j] = Avx512(_mm512_shuffle_f32x4::<0x88>(low.0, low.1));
                out[4 + j] = Avx512(_mm512_shuffle_f32x4::<0xdd>(low.0, low.1));
                out[8 + j] = Avx512(_mm512_shuffle_f32x4::<0x88>(high.0, high.1));
                out[12 + j] = Avx512(_mm512_shuffle_f32x4::<0xdd>(high.0, high.1));
            }
            out
        }
    }
}

/// A 256-bit register (AVX2, FMA and F16C).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) struct Avx2(__m256);

#[cfg(target_arch = "x86_64")]
impl Vector for Avx2 {
    const LANES: usize = 8;
    /// A lane's sign bit set where it is enabled (`vmaskmovps`'s form).
    type Mask = __m256i;
    type Tile = [Avx2; 8];

    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe { Avx2(_mm256_setzero_ps()) }
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe { Avx2(_mm256_set1_ps(v)) }
    }
    #[inline(always)]
    unsafe fn mul_add(a: Self, b: Self, c: Self) -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe { Avx2(_mm256_fmadd_ps(a.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe { Avx2(_mm256_add_ps(a.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set, the lanes are in bounds).
        unsafe { Avx2(_mm256_loadu_ps(p)) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        // SAFETY: the trait's contract (the CPU has the instruction set, the lanes are in bounds).
        unsafe { _mm256_storeu_ps(p, v.0) }
    }
    #[inline(always)]
    unsafe fn mask(len: usize) -> Self::Mask {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe {
            // Lane i is enabled where min(len, 8) > i.
            _mm256_cmpgt_epi32(_mm256_set1_epi32(len.min(8) as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
        }
    }
    #[inline(always)]
    unsafe fn load_masked(p: *const f32, mask: Self::Mask) -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set, the enabled lanes are in bounds); masked-off lanes do not fault.
        unsafe { Avx2(_mm256_maskload_ps(p, mask)) }
    }
    #[inline(always)]
    unsafe fn store_masked(p: *mut f32, mask: Self::Mask, v: Self) {
        // SAFETY: the trait's contract (the CPU has the instruction set, the enabled lanes are in bounds); masked-off lanes do not fault.
        unsafe { _mm256_maskstore_ps(p, mask, v.0) }
    }
    #[inline(always)]
    unsafe fn zero_tile() -> Self::Tile {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe { [Avx2(_mm256_setzero_ps()); 8] }
    }
    #[inline(always)]
    unsafe fn round_bf16(v: Self) -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe {
            let bits = _mm256_castps_si256(v.0);
            let odd = _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
            let carried = _mm256_add_epi32(bits, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff)));
            let rounded = _mm256_and_si256(carried, _mm256_set1_epi32(BF16_KEPT));
            let quiet =
                _mm256_and_si256(_mm256_or_si256(bits, _mm256_set1_epi32(BF16_QUIET)), _mm256_set1_epi32(BF16_KEPT));
            let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(v.0, v.0));
            Avx2(_mm256_castsi256_ps(_mm256_blendv_epi8(rounded, quiet, nan)))
        }
    }
    #[inline(always)]
    unsafe fn round_f16(v: Self) -> Self {
        // SAFETY: the trait's contract (the CPU has the instruction set,
        // which for this register includes F16C).
        unsafe { Avx2(_mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v.0))) }
    }
    /// Rows interleaved by 32 and then 64 bits give, in each 128-bit half,
    /// four rows of one column; swapping halves between rows `j` and
    /// `j + 4` completes each column.
    #[inline(always)]
    unsafe fn transpose(rows: Self::Tile) -> Self::Tile {
        // SAFETY: the trait's contract (the CPU has the instruction set).
        unsafe {
            let r = rows.map(|v| v.0);
            let mut t = [_mm256_setzero_ps(); 8];
            for q in 0..2 {
                let (a, b, c, d) = (r[4 * q], r[4 * q + 1], r[4 * q + 2], r[4 * q + 3]);
                let (ab_lo, ab_hi) =
                    (_mm256_castps_pd(_mm256_unpacklo_ps(a, b)), _mm256_castps_pd(_mm256_unpackhi_ps(a, b)));
                let (cd_lo, cd_hi) =
                    (_mm256_castps_pd(_mm256_unpacklo_ps(c, d)), _mm256_castps_pd(_mm256_unpackhi_ps(c, d)));
                // t[4q + j], half h: column 4h + j of rows 4q..4q + 4.
                t[4 * q] = _mm256_castpd_ps(_mm256_unpacklo_pd(ab_lo, cd_lo));
                t[4 * q + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(ab_lo, cd_lo));
                t[4 * q + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(ab_hi, cd_hi));
                t[4 * q + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(ab_hi, cd_hi));
            }
            let mut out = [Avx2(_mm256_setzero_ps()); 8];
            for j in 0..4 {
                out[j] = Avx2(_mm256_permute2f128_ps::<0x20>(t[j], t[4 + j]));
                out[4 + j] = Avx2(_mm256_permute2f128_ps::<0x31>(t[j], t[4 + j]));
            }
            out
        }
    }
}

#[cfg(all(test, target_arch = "x86_64", not(miri)))]
mod tests {
    use super::*;
    use half::{bf16, f16};

    /// Bit patterns that catch each part of the rounding: ties with an even
    /// and an odd kept part, one step either side of a tie, the largest
    /// finite value (which rounds to infinity), infinities, subnormals,
    /// signalling and quiet NaNs with payloads; then a sweep of patterns
    /// over every exponent.
    fn patterns() -> Vec<u32> {
        let mut bits = vec![
            0x3f80_8000,
            0x3f81_8000,
            0x3f80_8001,
            0x3f80_7fff,
            0x3f81_7fff,
            0x7f7f_ffff,
            0xff7f_ffff,
            0x7f80_0000,
            0xff80_0000,
            0x0000_0001,
            0x0000_8000,
            0x0001_8000,
            0x807f_ffff,
            0x7f80_0001,
            0xff80_8001,
            0x7fc0_0000,
            0x7fa1_2345,
            0x0000_0000,
            0x8000_0000,
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        bits.extend((0..200_000).map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 32) as u32
        }));
        bits
    }

    /// Rounds `values` a vector at a time with `V`, to each half type,
    /// compared with `half`'s scalar conversion of one value.
    ///
    /// # Safety
    ///
    /// The CPU must support `V`'s instruction set.
    #[inline(always)]
    unsafe fn check<V: Vector>() {
        let values: Vec<f32> = patterns().into_iter().map(f32::from_bits).collect();
        for to in [Rounding::Bf16, Rounding::F16] {
            for chunk in values.chunks_exact(V::LANES) {
                let mut out = vec![0.0f32; V::LANES];
                // SAFETY: the caller's instruction set; `chunk` and `out` hold a vector.
                unsafe { V::store(out.as_mut_ptr(), V::round_to(V::load(chunk.as_ptr()), to)) };
                for (&v, &got) in chunk.iter().zip(&out) {
                    let want = match to {
                        Rounding::Bf16 => bf16::from_f32(v).to_f32(),
                        Rounding::F16 => f16::from_f32(v).to_f32(),
                    };
                    assert_eq!(got.to_bits(), want.to_bits(), "{to:?} of {:#010x}", v.to_bits());
                    assert_eq!(to.scalar(v).to_bits(), want.to_bits(), "{to:?} of {:#010x}", v.to_bits());
                }
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn check_avx512() {
        // SAFETY: the caller's.
        unsafe { check::<Avx512>() }
    }

    #[target_feature(enable = "avx2,f16c")]
    unsafe fn check_avx2() {
        // SAFETY: the caller's.
        unsafe { check::<Avx2>() }
    }

    #[test]
    fn vector_half_rounding_matches_half() {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: detected above.
            unsafe { check_avx512() };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c") {
            // SAFETY: detected above.
            unsafe { check_avx2() };
        }
    }
}
