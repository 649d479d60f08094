//! PyTorch-style printing: `tensor([[1., 2.], [3., 4.]], device=Cuda<0>)`,
//! with large tensors summarised by their edges.

use super::Tensor;
use crate::element::{DType, Element};
use crate::tensor::shell::core_table;
use crate::tensor::{CoreDevice, Device};
use std::fmt;

/// Tensors with more elements than this are summarised, as in PyTorch.
const SUMMARY_THRESHOLD: usize = 1000;
/// Elements kept at each end of a summarised axis.
const EDGE_ITEMS: usize = 3;

/// How every element of one tensor is written, chosen once so columns align.
enum Style {
    Integer,
    /// All values are whole numbers: `1.`, `-3.`.
    WholeFloat,
    /// Four decimals: `0.1235`.
    Fixed,
    /// Four decimals in scientific notation: `1.2346e+08`.
    Scientific,
}

impl Style {
    fn choose<E: Element>(values: &[E]) -> Style {
        if !E::IS_FLOAT {
            return Style::Integer;
        }
        let finite: Vec<f64> = values.iter().map(|v| v.to_f64()).filter(|v| v.is_finite()).collect();
        if finite.iter().all(|v| v.fract() == 0.0) {
            let max = finite.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            return if max < 1e8 { Style::WholeFloat } else { Style::Scientific };
        }
        let nonzero = finite.iter().map(|v| v.abs()).filter(|&v| v > 0.0);
        let (min, max) = nonzero.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        if max >= 1e8 || min < 1e-4 || max / min > 1e7 { Style::Scientific } else { Style::Fixed }
    }

    fn write<E: Element>(&self, value: E) -> String {
        let v = value.to_f64();
        if v.is_nan() {
            return "nan".into();
        }
        if v.is_infinite() {
            return if v > 0.0 { "inf".into() } else { "-inf".into() };
        }
        match self {
            Style::Integer => format!("{value}"),
            Style::WholeFloat => format!("{v:.0}."),
            Style::Fixed => format!("{v:.4}"),
            Style::Scientific => {
                // Rust writes `1.2346e8`; PyTorch users expect `1.2346e+08`.
                let s = format!("{v:.4e}");
                let (mantissa, exp) = s.split_once('e').expect("`e` format has an exponent");
                let exp: i32 = exp.parse().expect("exponent is an integer");
                format!("{mantissa}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
            }
        }
    }
}

/// Writes the nested brackets for `dims` over row-major `cells`, which hold
/// only the shown elements when summarising (see [`edges`]).
struct Printer<'a> {
    dims: &'a [usize],
    cell_dims: &'a [usize],
    cells: &'a [String],
    width: usize,
    summarise: bool,
    indent: usize,
}

impl Printer<'_> {
    /// Indices along an axis of size `n` that are shown; `None` marks the `...`.
    fn shown(&self, n: usize) -> Vec<Option<usize>> {
        if self.summarise && n > 2 * EDGE_ITEMS {
            (0..EDGE_ITEMS).map(Some).chain([None]).chain((n - EDGE_ITEMS..n).map(Some)).collect()
        } else {
            (0..n).map(Some).collect()
        }
    }

    fn write(&self, out: &mut String, axis: usize, base: usize) {
        let n = self.dims[axis];
        let stride: usize = self.cell_dims[axis + 1..].iter().product();
        // Where index `i` of the full axis sits among the kept cells.
        // Where index `i` of the full axis sits among the kept cells: a
        // summarised axis keeps its first and last `EDGE_ITEMS`.
        let cell = |i: usize| if self.cell_dims[axis] < n && i >= EDGE_ITEMS { i - (n - 2 * EDGE_ITEMS) } else { i };
        out.push('[');
        let last_axis = axis + 1 == self.dims.len();
        let separator = if last_axis {
            ", ".to_string()
        } else {
            let blank_lines = "\n".repeat(self.dims.len() - axis - 1);
            format!(",{blank_lines}{}", " ".repeat(self.indent + axis + 1))
        };
        for (k, index) in self.shown(n).into_iter().enumerate() {
            if k > 0 {
                out.push_str(&separator);
            }
            match (index, last_axis) {
                (None, _) => out.push_str("..."),
                (Some(i), true) => {
                    out.push_str(&format!("{:>w$}", self.cells[base + cell(i) * stride], w = self.width))
                }
                (Some(i), false) => self.write(out, axis + 1, base + cell(i) * stride),
            }
        }
        out.push(']');
    }
}

/// The elements a summary shows: each axis longer than `2 * EDGE_ITEMS`
/// cut to its first and last `EDGE_ITEMS`, so that printing a huge tensor
/// (or a broadcast view larger than memory) reads only what it prints.
fn edges<D: CoreDevice, E: Element>(tensor: &Tensor<D, E>) -> crate::Result<Tensor<D, E>> {
    let mut kept = tensor.clone();
    for (axis, &n) in tensor.dims().iter().enumerate() {
        if n > 2 * EDGE_ITEMS {
            let head = kept.try_narrow(axis as isize, 0, EDGE_ITEMS)?;
            let tail = kept.try_narrow(axis as isize, n - EDGE_ITEMS, EDGE_ITEMS)?;
            kept = Tensor::try_cat(&[&head, &tail], axis as isize)?;
        }
    }
    Ok(kept)
}

impl<D: Device, E: Element> fmt::Display for Tensor<D, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        D::enter(|| (Fns::<D::Core, E>::get().display)(self.core(), f))
    }
}

/// PyTorch's text of a tensor of the core device `D`.
fn display<D: CoreDevice, E: Element>(tensor: &Tensor<D, E>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let summarise = tensor.elem_count() > SUMMARY_THRESHOLD;
    let shown = if summarise { edges(tensor) } else { Ok(tensor.clone()) };
    let (shown, values) = match shown.and_then(|t| t.try_to_vec().map(|v| (t, v))) {
        Ok(read) => read,
        Err(err) => return write!(f, "tensor(<unreadable: {err}>)"),
    };
    let style = Style::choose(&values);
    let cells: Vec<String> = values.iter().map(|&v| style.write(v)).collect();
    let mut body = String::new();
    match tensor.dims() {
        [] => body.push_str(&cells[0]),
        dims if dims.contains(&0) => body.push_str("[]"),
        dims => {
            let width = cells.iter().map(String::len).max().unwrap_or(0);
            let indent = "tensor(".len();
            Printer { dims, cell_dims: shown.dims(), cells: &cells, width, summarise, indent }.write(&mut body, 0, 0);
        }
    }
    write!(f, "tensor({body}")?;
    if tensor.elem_count() == 0 && tensor.rank() != 1 {
        write!(f, ", size={}", tensor.shape())?;
    }
    let device = D::name();
    if device != "Cpu" {
        write!(f, ", device={device}")?;
    }
    // PyTorch names the dtype unless it is the default of its kind.
    let named = match E::DTYPE {
        DType::F32 | DType::I64 => false,
        DType::F64 | DType::BF16 | DType::F16 | DType::U8 => true,
    };
    if named {
        write!(f, ", dtype={}", E::DTYPE.name())?;
    }
    f.write_str(")")
}

core_table! {
    /// The core's printing.
    pub(crate) struct Fns<C, E: Element> {
        display: for<'a, 'b> fn(&'a Tensor<C, E>, &'a mut fmt::Formatter<'b>) -> fmt::Result = display,
    }
}

/// The same text as `Display`, like PyTorch's `repr`.
///
/// ```
/// use devtensor::{Cpu, Tensor};
/// let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]);
/// assert_eq!(format!("{x:?}"), "tensor([[1., 2.],\n        [3., 4.]])");
/// ```
impl<D: Device, E: Element> fmt::Debug for Tensor<D, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Cpu, Tensor};

    #[test]
    fn prints_like_pytorch() {
        let x = Tensor::<Cpu>::from_vec(vec![0.5, -1.25, 3.0], [3]);
        assert_eq!(x.to_string(), "tensor([ 0.5000, -1.2500,  3.0000])");
        assert_eq!(Tensor::<Cpu>::scalar(2.0).to_string(), "tensor(2.)");
        assert_eq!(Tensor::<Cpu, i64>::from_vec(vec![1, -20], [2]).to_string(), "tensor([  1, -20])");
        assert_eq!(Tensor::<Cpu, f64>::ones([1]).to_string(), "tensor([1.], dtype=f64)");
        assert_eq!(Tensor::<Cpu, u8>::ones([2]).to_string(), "tensor([1, 1], dtype=u8)");
        assert_eq!(Tensor::<Cpu>::zeros([0]).to_string(), "tensor([])");
        assert_eq!(Tensor::<Cpu>::zeros([0, 3]).to_string(), "tensor([], size=[0, 3])");
        assert_eq!(Tensor::<Cpu>::from_vec(vec![1e9, 1.0], [2]).to_string(), "tensor([1.0000e+09, 1.0000e+00])");
        assert_eq!(
            Tensor::<Cpu>::from_vec(vec![f32::NAN, f32::NEG_INFINITY, 1.0], [3]).to_string(),
            "tensor([ nan, -inf,   1.])"
        );
    }

    #[test]
    fn prints_nested_blocks() {
        let x = Tensor::<Cpu, i64>::from_vec((0..8).collect(), [2, 2, 2]);
        assert_eq!(x.to_string(), "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])");
    }

    #[test]
    fn summaries_read_only_the_edges() {
        // 2^40 elements: printed from the 6 it shows, not materialised.
        let x = Tensor::<Cpu>::from_vec(vec![1.0, 2.5], [2]).broadcast_to([1 << 39, 2]);
        let text = x.to_string();
        assert!(text.starts_with("tensor([[1.0000, 2.5000],\n        [1.0000, 2.5000],"), "{text}");
        assert!(text.contains("        ...,\n") && text.ends_with("[1.0000, 2.5000]])"), "{text}");
    }

    #[test]
    fn summarises_large_tensors() {
        let x = Tensor::<Cpu, i64>::from_vec((0..2000).collect(), [2000]);
        assert_eq!(x.to_string(), "tensor([   0,    1,    2, ..., 1997, 1998, 1999])");
        let y = Tensor::<Cpu, i64>::from_vec((0..1100).collect(), [100, 11]);
        let text = y.to_string();
        assert!(text.starts_with("tensor([[   0,    1,    2, ...,    8,    9,   10],\n        [  11,"), "{text}");
        assert!(text.contains("        ...,\n"), "{text}");
        assert!(text.ends_with(", 1097, 1098, 1099]])"), "{text}");
    }
}
