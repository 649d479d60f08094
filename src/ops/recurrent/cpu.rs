//! The fused gates on the CPU: one vectorised loop over each row's hidden
//! units, in `E::Accumulator` (`f32` for the half types), with the
//! vectorisable `sigmoid` and `tanh` of the CPU backend.
//!
//! One thread: a step's gates are `batch · hidden` elements (4,096 in the
//! tutorials' char-LSTM), far fewer than would pay for waking the pool,
//! and the products on either side of them take the threads.

use super::{GateInput, RecurrentKernel};
use crate::backend::Cpu;
use crate::backend::cpu::{CpuStorage, VectorLoop, output_buffer, sigmoid, tanh, vectorized};
use crate::element::{Element, FloatElement};
use crate::error::Result;

/// `len` elements of an operand from its offset.
fn read<'a, E: FloatElement>((storage, offset): GateInput<'a, Cpu, E>, len: usize) -> &'a [E] {
    &storage.as_slice()[offset..offset + len]
}

/// `x` in the type the gates compute in.
#[inline(always)]
fn wide<E: FloatElement>(x: E) -> E::Accumulator {
    x.cast()
}

/// `x` rounded back to the element type.
#[inline(always)]
fn narrow<E: FloatElement>(x: E::Accumulator) -> E {
    x.cast()
}

/// A row of `G` gates, `G · n` elements, as one slice of exactly `n` per
/// gate: indexed by a unit below `n`, the loop then vectorises with no
/// bounds checks.
#[inline(always)]
fn gates<const G: usize, T>(row: &[T], n: usize) -> [&[T]; G] {
    std::array::from_fn(|k| &row[k * n..][..n])
}

/// [`gates`] for a row being written.
#[inline(always)]
fn gates_mut<const G: usize, T>(row: &mut [T], n: usize) -> [&mut [T]; G] {
    let mut parts = row.chunks_exact_mut(n);
    std::array::from_fn(|_| &mut parts.next().expect("a row holds G gates of n units")[..n])
}

/// Row `r` of a `[rows, n]` buffer, exactly `n` long.
#[inline(always)]
fn row<T>(x: &[T], r: usize, n: usize) -> &[T] {
    &x[r * n..][..n]
}

/// [`row`] of a buffer being written.
#[inline(always)]
fn row_mut<T>(x: &mut [T], r: usize, n: usize) -> &mut [T] {
    &mut x[r * n..][..n]
}

/// Unit `j` of every gate, widened.
#[inline(always)]
fn at<E: FloatElement, const G: usize>(gates: &[&[E]; G], j: usize) -> [E::Accumulator; G] {
    let mut unit = [E::Accumulator::ZERO; G];
    for (u, gate) in unit.iter_mut().zip(gates) {
        *u = wide(gate[j]);
    }
    unit
}

/// One LSTM unit: `h'`, `c'`, and what the gradient reads (`i, f, g, o,
/// tanh(c')`), from the pre-activations' two parts and `c`.
#[inline(always)]
fn lstm_unit<A: FloatElement, const FMA: bool>(x: [A; 4], h: [A; 4], c: A) -> (A, A, [A; 5]) {
    let i = sigmoid::<_, FMA>(x[0] + h[0]);
    let f = sigmoid::<_, FMA>(x[1] + h[1]);
    let g = tanh::<_, FMA>(x[2] + h[2]);
    let o = sigmoid::<_, FMA>(x[3] + h[3]);
    let c_next = f * c + i * g;
    let tc = tanh::<_, FMA>(c_next);
    (o * tc, c_next, [i, f, g, o, tc])
}

/// One GRU unit: the new state and what the gradient reads (`r, z, n`
/// and the state's part of the new gate).
#[inline(always)]
fn gru_unit<A: FloatElement, const FMA: bool>(x: [A; 3], gh: [A; 3], h: A) -> (A, [A; 4]) {
    let r = sigmoid::<_, FMA>(x[0] + gh[0]);
    let z = sigmoid::<_, FMA>(x[1] + gh[1]);
    let n = tanh::<_, FMA>(x[2] + r * gh[2]);
    // (1 - z) n + z h, in the order of PyTorch's fused kernel: n + z (h - n).
    (n + z * (h - n), [r, z, n, gh[2]])
}

struct LstmForward<'a, E> {
    gx: &'a [E],
    gh: &'a [E],
    c: &'a [E],
    out: &'a mut [E],
    saved: Option<&'a mut [E]>,
    batch: usize,
    hidden: usize,
}

impl<E: FloatElement> VectorLoop for LstmForward<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let (b, n) = (self.batch, self.hidden);
        let (hs, cs) = self.out.split_at_mut(b * n);
        let mut saved = self.saved;
        for r in 0..b {
            let gx: [&[E]; 4] = gates(row(self.gx, r, 4 * n), n);
            let gh: [&[E]; 4] = gates(row(self.gh, r, 4 * n), n);
            let (c, h_out, c_out) = (row(self.c, r, n), row_mut(hs, r, n), row_mut(cs, r, n));
            // Two loops rather than a test per unit, so that each vectorises;
            // no closure, which would not inherit the loop's target features.
            match saved.as_deref_mut() {
                Some(saved) => {
                    let mut s: [&mut [E]; 5] = gates_mut(row_mut(saved, r, 5 * n), n);
                    for j in 0..n {
                        let (h, c, keep) = lstm_unit::<_, FMA>(at(&gx, j), at(&gh, j), wide(c[j]));
                        (h_out[j], c_out[j]) = (narrow(h), narrow(c));
                        for (s, v) in s.iter_mut().zip(keep) {
                            s[j] = narrow(v);
                        }
                    }
                }
                None => {
                    for j in 0..n {
                        let (h, c, _) = lstm_unit::<_, FMA>(at(&gx, j), at(&gh, j), wide(c[j]));
                        (h_out[j], c_out[j]) = (narrow(h), narrow(c));
                    }
                }
            }
        }
    }
}

struct LstmBackward<'a, E> {
    dh: &'a [E],
    dc_in: &'a [E],
    saved: &'a [E],
    c: &'a [E],
    dgates: &'a mut [E],
    dc: &'a mut [E],
    batch: usize,
    hidden: usize,
}

impl<E: FloatElement> VectorLoop for LstmBackward<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let (b, n) = (self.batch, self.hidden);
        let one = E::Accumulator::ONE;
        let (dh_all, dc_all) = (self.dh, self.dc_in);
        for r in 0..b {
            let [si, sf, sg, so, st] = gates(row(self.saved, r, 5 * n), n);
            let [di, df, dg, d_o] = gates_mut(row_mut(self.dgates, r, 4 * n), n);
            let (dh, dc) = (row(dh_all, r, n), row(dc_all, r, n));
            let (c, dc_out) = (row(self.c, r, n), row_mut(self.dc, r, n));
            for j in 0..n {
                let (i, f, g, o, tc) = (wide(si[j]), wide(sf[j]), wide(sg[j]), wide(so[j]), wide(st[j]));
                let (dh, dc) = (wide(dh[j]), wide(dc[j]));
                // h' = o tanh(c'), c' = f c + i g: the gradient reaching c'.
                let dct = dc + dh * o * (one - tc * tc);
                di[j] = narrow(dct * g * i * (one - i));
                df[j] = narrow(dct * wide(c[j]) * f * (one - f));
                dg[j] = narrow(dct * i * (one - g * g));
                d_o[j] = narrow(dh * tc * o * (one - o));
                dc_out[j] = narrow(dct * f);
            }
        }
    }
}

struct GruForward<'a, E> {
    gx: &'a [E],
    gh: &'a [E],
    h: &'a [E],
    out: &'a mut [E],
    saved: Option<&'a mut [E]>,
    batch: usize,
    hidden: usize,
}

impl<E: FloatElement> VectorLoop for GruForward<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let (b, n) = (self.batch, self.hidden);
        let mut saved = self.saved;
        for r in 0..b {
            let gx: [&[E]; 3] = gates(row(self.gx, r, 3 * n), n);
            let gh: [&[E]; 3] = gates(row(self.gh, r, 3 * n), n);
            let (h, out) = (row(self.h, r, n), row_mut(self.out, r, n));
            match saved.as_deref_mut() {
                Some(saved) => {
                    let mut s: [&mut [E]; 4] = gates_mut(row_mut(saved, r, 4 * n), n);
                    for j in 0..n {
                        let (h, keep) = gru_unit::<_, FMA>(at(&gx, j), at(&gh, j), wide(h[j]));
                        out[j] = narrow(h);
                        for (s, v) in s.iter_mut().zip(keep) {
                            s[j] = narrow(v);
                        }
                    }
                }
                None => {
                    for j in 0..n {
                        out[j] = narrow(gru_unit::<_, FMA>(at(&gx, j), at(&gh, j), wide(h[j])).0);
                    }
                }
            }
        }
    }
}

struct GruBackward<'a, E> {
    grad: &'a [E],
    saved: &'a [E],
    h: &'a [E],
    dgx: &'a mut [E],
    dgh: &'a mut [E],
    dh: &'a mut [E],
    batch: usize,
    hidden: usize,
}

impl<E: FloatElement> VectorLoop for GruBackward<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let (b, n) = (self.batch, self.hidden);
        let one = E::Accumulator::ONE;
        for r in 0..b {
            let [sr, sz, sn, sh] = gates(&self.saved[r * 4 * n..(r + 1) * 4 * n], n);
            let [xr, xz, xn] = gates_mut(&mut self.dgx[r * 3 * n..(r + 1) * 3 * n], n);
            let [hr, hz, hn] = gates_mut(&mut self.dgh[r * 3 * n..(r + 1) * 3 * n], n);
            let (g, h, dh) =
                (&self.grad[r * n..(r + 1) * n], &self.h[r * n..(r + 1) * n], &mut self.dh[r * n..(r + 1) * n]);
            for j in 0..n {
                let (rg, z, new, ghn) = (wide(sr[j]), wide(sz[j]), wide(sn[j]), wide(sh[j]));
                let (g, h) = (wide(g[j]), wide(h[j]));
                let dn = g * (one - z) * (one - new * new);
                let dr = dn * ghn * rg * (one - rg);
                let dz = g * (h - new) * z * (one - z);
                (xr[j], xz[j], xn[j]) = (narrow(dr), narrow(dz), narrow(dn));
                (hr[j], hz[j], hn[j]) = (narrow(dr), narrow(dz), narrow(dn * rg));
                dh[j] = narrow(g * z);
            }
        }
    }
}

/// A saved buffer of `len` elements, if the gradient needs one.
fn saved_buffer<E: FloatElement>(op: &'static str, save: bool, len: usize) -> Result<Option<Vec<E>>> {
    save.then(|| output_buffer::<E>(op, len)).transpose()
}

impl RecurrentKernel for Cpu {
    fn lstm_gates<E: FloatElement>(
        gx: GateInput<'_, Self, E>,
        gh: GateInput<'_, Self, E>,
        c: GateInput<'_, Self, E>,
        batch: usize,
        hidden: usize,
        save: bool,
    ) -> Result<(CpuStorage<E>, Option<CpuStorage<E>>)> {
        const OP: &str = "lstm_gates";
        let (cells, width) = (batch * hidden, batch * hidden * 4);
        // Written in full by the loop: no zeroing.
        let mut out = output_buffer::<E>(OP, 2 * cells)?;
        let mut saved = saved_buffer::<E>(OP, save, 5 * cells)?;
        vectorized(LstmForward {
            gx: read(gx, width),
            gh: read(gh, width),
            c: read(c, cells),
            out: &mut out,
            saved: saved.as_deref_mut(),
            batch,
            hidden,
        });
        Ok((CpuStorage::from_vec(out), saved.map(CpuStorage::from_vec)))
    }

    fn lstm_gates_backward<E: FloatElement>(
        dh: GateInput<'_, Self, E>,
        dc: GateInput<'_, Self, E>,
        saved: &CpuStorage<E>,
        c: GateInput<'_, Self, E>,
        batch: usize,
        hidden: usize,
    ) -> Result<(CpuStorage<E>, CpuStorage<E>)> {
        const OP: &str = "lstm_gates_backward";
        let cells = batch * hidden;
        let mut dgates = output_buffer::<E>(OP, 4 * cells)?;
        let mut dc_out = output_buffer::<E>(OP, cells)?;
        vectorized(LstmBackward {
            dh: read(dh, cells),
            dc_in: read(dc, cells),
            saved: saved.as_slice(),
            c: read(c, cells),
            dgates: &mut dgates,
            dc: &mut dc_out,
            batch,
            hidden,
        });
        Ok((CpuStorage::from_vec(dgates), CpuStorage::from_vec(dc_out)))
    }

    fn gru_gates<E: FloatElement>(
        gx: GateInput<'_, Self, E>,
        gh: GateInput<'_, Self, E>,
        h: GateInput<'_, Self, E>,
        batch: usize,
        hidden: usize,
        save: bool,
    ) -> Result<(CpuStorage<E>, Option<CpuStorage<E>>)> {
        const OP: &str = "gru_gates";
        let cells = batch * hidden;
        let mut out = output_buffer::<E>(OP, cells)?;
        let mut saved = saved_buffer::<E>(OP, save, 4 * cells)?;
        vectorized(GruForward {
            gx: read(gx, 3 * cells),
            gh: read(gh, 3 * cells),
            h: read(h, cells),
            out: &mut out,
            saved: saved.as_deref_mut(),
            batch,
            hidden,
        });
        Ok((CpuStorage::from_vec(out), saved.map(CpuStorage::from_vec)))
    }

    fn gru_gates_backward<E: FloatElement>(
        grad: GateInput<'_, Self, E>,
        saved: &CpuStorage<E>,
        h: GateInput<'_, Self, E>,
        batch: usize,
        hidden: usize,
    ) -> Result<[CpuStorage<E>; 3]> {
        const OP: &str = "gru_gates_backward";
        let cells = batch * hidden;
        let mut dgx = output_buffer::<E>(OP, 3 * cells)?;
        let mut dgh = output_buffer::<E>(OP, 3 * cells)?;
        let mut dh = output_buffer::<E>(OP, cells)?;
        vectorized(GruBackward {
            grad: read(grad, cells),
            saved: saved.as_slice(),
            h: read(h, cells),
            dgx: &mut dgx,
            dgh: &mut dgh,
            dh: &mut dh,
            batch,
            hidden,
        });
        Ok([dgx, dgh, dh].map(CpuStorage::from_vec))
    }
}
