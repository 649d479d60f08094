//! `torch.einsum`: an equation of subscripts contracted through the batched
//! product. The equation is parsed once into a plan: the axes that appear in
//! one operand only and not in the output are summed first, then operands
//! are contracted two at a time, each time the pair whose result is
//! smallest, as `[batch, left, summed] · [batch, summed, right]` products;
//! the result is permuted to the output's order. Every step is a recorded
//! op (`sum_axis`, `permute`, `reshape`, `matmul`), so the gradient, and
//! the gradient's gradient, come from theirs.

use super::Fns;
use crate::element::FloatElement;
use crate::error::{Error, Result};
use crate::tensor::shell::core_call;
use crate::tensor::{CoreDevice, Device, Tensor};
use devtensor_macros::fallible;

impl<D: Device, F: FloatElement> Tensor<D, F> {
    /// The operands combined as the subscripts of `equation` say, like
    /// `torch.einsum(equation, *operands)`: one group of letters per
    /// operand, separated by commas, each letter naming one axis (a letter
    /// repeated in one operand takes its diagonal), `...` for the axes the
    /// letters leave (broadcast between operands, right-aligned), and after
    /// `->` the output's letters; without `->`, the output is the letters
    /// that appear once, in alphabetical order, after the `...` axes.
    /// Letters missing from the output are summed over. Sizes of one letter
    /// must agree, or be 1 (broadcast). Spaces are ignored.
    ///
    /// Fails on an equation that does not parse, a letter count that is not
    /// an operand's rank, an output letter that no operand has or that
    /// repeats, and sizes that disagree.
    ///
    /// Stable Diffusion's attention scores, a batched product and a trace:
    /// ```
    /// use devtensor::{Cpu, Tensor};
    /// let q = Tensor::<Cpu>::randn([2, 16, 8]);
    /// let k = Tensor::<Cpu>::randn([2, 16, 8]);
    /// let scores = Tensor::einsum("b i d, b j d -> b i j", &[&q, &k]);
    /// assert_eq!(scores.dims(), &[2, 16, 16]);
    /// let same = q.matmul(&k.transpose(1, 2));
    /// assert!((&scores - &same).abs().max().item() < 1e-5);
    ///
    /// let m = Tensor::<Cpu>::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(Tensor::einsum("ii", &[&m]).item(), 5.0);
    /// assert_eq!(Tensor::einsum("ij->j", &[&m]).to_vec(), vec![4.0, 6.0]);
    /// assert_eq!(Tensor::einsum("...j,j", &[&m, &m.select(0, 0)]).to_vec(), vec![5.0, 11.0]);
    /// assert!(Tensor::try_einsum("ij,jk", &[&m, &Tensor::zeros([3, 2])]).is_err());
    /// ```
    #[fallible]
    pub fn einsum(equation: &str, operands: &[&Self]) -> Self {
        let operands: Vec<&Tensor<D::Core, F>> = operands.iter().map(|t| t.core()).collect();
        core_call!(D, Fns<F>.einsum(equation, &operands))
    }
}

/// An axis label: a letter, or one of the axes `...` stands for (numbered
/// from the last).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Label {
    Broadcast(usize),
    Letter(char),
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Label::Letter(c) => write!(f, "`{c}`"),
            Label::Broadcast(k) => write!(f, "`...` (axis {k} from the end)"),
        }
    }
}

/// One operand in the course of the contraction: its tensor and the label
/// of each of its axes.
struct Term<D: CoreDevice, F: FloatElement> {
    tensor: Tensor<D, F>,
    labels: Vec<Label>,
}

impl<D: CoreDevice, F: FloatElement> Tensor<D, F> {
    pub(super) fn core_einsum(equation: &str, operands: &[&Self]) -> Result<Self> {
        let fail = |reason: String| Error::Argument { op: "einsum", device: D::name(), reason };
        let equation: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        let (inputs, output) = match equation.split_once("->") {
            Some((lhs, rhs)) => (lhs, Some(rhs)),
            None => (equation.as_str(), None),
        };
        let groups: Vec<&str> = inputs.split(',').collect();
        if groups.len() != operands.len() {
            return Err(fail(format!(
                "the equation {equation:?} has subscripts for {} operands, but {} were given",
                groups.len(),
                operands.len()
            )));
        }
        let mut terms = Vec::with_capacity(operands.len());
        let mut broadcast_rank = 0;
        for (k, (group, t)) in groups.iter().zip(operands).enumerate() {
            let labels =
                parse_labels(group, t.rank()).map_err(|why| fail(format!("operand {k} ({group:?}): {why}")))?;
            broadcast_rank = broadcast_rank.max(labels.iter().filter(|l| matches!(l, Label::Broadcast(_))).count());
            terms.push(Term { tensor: (*t).clone(), labels });
        }
        let output = match output {
            Some(out) => {
                let labels =
                    parse_labels(out, usize::MAX).map_err(|why| fail(format!("the output ({out:?}): {why}")))?;
                for (i, l) in labels.iter().enumerate() {
                    if labels[..i].contains(l) {
                        return Err(fail(format!("the output ({out:?}) repeats {l}")));
                    }
                    if let Label::Letter(c) = l
                        && !terms.iter().any(|t| t.labels.contains(l))
                    {
                        return Err(fail(format!("the output subscript `{c}` is in no operand")));
                    }
                }
                // `...` in the output stands for every broadcast axis.
                let mut expanded = Vec::new();
                for l in labels {
                    match l {
                        Label::Broadcast(_) if expanded.iter().any(|e| matches!(e, Label::Broadcast(_))) => {}
                        Label::Broadcast(_) => expanded.extend((0..broadcast_rank).rev().map(Label::Broadcast)),
                        letter => expanded.push(letter),
                    }
                }
                expanded
            }
            None => {
                let mut once: Vec<Label> = Vec::new();
                for t in &terms {
                    for l in &t.labels {
                        if let Label::Letter(_) = l {
                            let count: usize = terms.iter().map(|t| t.labels.iter().filter(|m| *m == l).count()).sum();
                            if count == 1 {
                                once.push(*l);
                            }
                        }
                    }
                }
                once.sort();
                (0..broadcast_rank).rev().map(Label::Broadcast).chain(once).collect()
            }
        };
        let mut terms = terms.into_iter().map(take_diagonals).collect::<Result<Vec<_>>>()?;
        broadcast_sizes(&mut terms, &fail)?;
        // Sum each axis that no other operand and not the output has.
        for k in 0..terms.len() {
            let needed =
                |l: &Label| output.contains(l) || terms.iter().enumerate().any(|(j, t)| j != k && t.labels.contains(l));
            let alone: Vec<usize> = (0..terms[k].labels.len()).filter(|&a| !needed(&terms[k].labels[a])).collect();
            if !alone.is_empty() {
                let t = &mut terms[k];
                let axes: Vec<isize> = alone.iter().map(|&a| a as isize).collect();
                t.tensor = t.tensor.try_sum_axis(axes)?;
                t.labels = t.labels.iter().enumerate().filter(|(a, _)| !alone.contains(a)).map(|(_, l)| *l).collect();
            }
        }
        while terms.len() > 1 {
            let (i, j) = cheapest_pair(&terms, &output);
            let b = terms.remove(j);
            let a = terms.remove(i);
            let keep = |l: &Label| output.contains(l) || terms.iter().any(|t| t.labels.contains(l));
            terms.insert(i, contract(a, b, keep)?);
        }
        let last = terms.pop().expect("at least one operand: the group count matched");
        let order: Vec<usize> = output
            .iter()
            .map(|l| last.labels.iter().position(|m| m == l).expect("every output label survives"))
            .collect();
        last.tensor.try_permute(order)
    }
}

/// The labels of one group of subscripts for an operand of `rank` axes
/// (`usize::MAX`: the output, whose rank is whatever the labels say).
fn parse_labels(group: &str, rank: usize) -> std::result::Result<Vec<Label>, String> {
    let dots = group.matches("...").count();
    if dots > 1 {
        return Err("`...` may appear once".into());
    }
    let letters: Vec<char> = group.replacen("...", "", 1).chars().collect();
    if let Some(c) = letters.iter().find(|c| !c.is_ascii_alphabetic()) {
        return Err(format!("{c:?} is not a letter (subscripts are a-z and A-Z)"));
    }
    if rank == usize::MAX {
        let (before, _) = group.split_once("...").unwrap_or((group, ""));
        let mut labels: Vec<Label> = before.chars().map(Label::Letter).collect();
        if dots == 1 {
            labels.push(Label::Broadcast(0));
            labels.extend(group.split_once("...").map_or("", |(_, after)| after).chars().map(Label::Letter));
        }
        return Ok(labels);
    }
    if letters.len() > rank || (dots == 0 && letters.len() != rank) {
        return Err(format!("{} letters for a tensor of rank {rank}", letters.len()));
    }
    let (before, after) = match group.split_once("...") {
        Some((b, a)) => (b, a),
        None => (group, ""),
    };
    let spread = rank - letters.len();
    let mut labels: Vec<Label> = before.chars().map(Label::Letter).collect();
    labels.extend((0..spread).rev().map(Label::Broadcast));
    labels.extend(after.chars().map(Label::Letter));
    Ok(labels)
}

/// `term` with each letter repeated in it reduced to one axis: its
/// diagonal (`ii->i`), gathered (so that what lies off it, an infinity or
/// a NaN, plays no part).
fn take_diagonals<D: CoreDevice, F: FloatElement>(mut term: Term<D, F>) -> Result<Term<D, F>> {
    while let Some((a, b)) = (0..term.labels.len())
        .flat_map(|a| (a + 1..term.labels.len()).map(move |b| (a, b)))
        .find(|&(a, b)| term.labels[a] == term.labels[b])
    {
        let (n, m) = (term.tensor.dims()[a], term.tensor.dims()[b]);
        if n != m {
            return Err(Error::Shape {
                op: "einsum",
                device: D::name(),
                shapes: vec![term.tensor.shape().clone()],
                reason: format!("a repeated subscript takes a diagonal, but its axes {a} and {b} differ ({n} vs {m})"),
            });
        }
        // Along axis `b`, the element whose position is the one on `a`.
        let mut along = vec![1; term.tensor.rank()];
        along[a] = n;
        let mut picks = term.tensor.dims().to_vec();
        picks[b] = 1;
        let diagonal = Tensor::<D, i64>::try_arange(0, n as i64)?.try_reshape(along)?.try_broadcast_to(picks)?;
        term.tensor = term.tensor.try_gather(b as isize, &diagonal)?.try_squeeze(b as isize)?;
        term.labels.remove(b);
    }
    Ok(term)
}

/// Each label's size across the operands, broadcasting sizes of 1.
fn broadcast_sizes<D: CoreDevice, F: FloatElement>(
    terms: &mut [Term<D, F>],
    fail: &impl Fn(String) -> Error,
) -> Result<()> {
    let mut sizes: Vec<(Label, usize)> = Vec::new();
    for t in terms.iter() {
        for (l, &n) in t.labels.iter().zip(t.tensor.dims()) {
            match sizes.iter_mut().find(|(m, _)| m == l) {
                Some((_, size)) if *size == 1 => *size = n,
                Some((_, size)) if n != 1 && n != *size => {
                    return Err(fail(format!("the axes of subscript {l} have sizes {size} and {n}")));
                }
                Some(_) => {}
                None => sizes.push((*l, n)),
            }
        }
    }
    for t in terms.iter_mut() {
        let want: Vec<usize> =
            t.labels.iter().map(|l| sizes.iter().find(|(m, _)| m == l).expect("seen above").1).collect();
        if want.as_slice() != t.tensor.dims() {
            t.tensor = t.tensor.try_broadcast_to(want)?;
        }
    }
    Ok(())
}

/// The size of the product of each label's size.
fn size_of(labels: &[Label], terms: &[Term<impl CoreDevice, impl FloatElement>]) -> usize {
    labels
        .iter()
        .map(|l| {
            terms.iter().find_map(|t| t.labels.iter().position(|m| m == l).map(|a| t.tensor.dims()[a])).unwrap_or(1)
        })
        .fold(1usize, |p, n| p.saturating_mul(n))
}

/// The pair of operands whose contraction gives the smallest result.
fn cheapest_pair<D: CoreDevice, F: FloatElement>(terms: &[Term<D, F>], output: &[Label]) -> (usize, usize) {
    let mut best = (0, 1, usize::MAX);
    for i in 0..terms.len() {
        for j in i + 1..terms.len() {
            let others = |l: &Label| {
                output.contains(l) || terms.iter().enumerate().any(|(k, t)| k != i && k != j && t.labels.contains(l))
            };
            let mut kept: Vec<Label> = terms[i].labels.iter().chain(&terms[j].labels).copied().filter(others).collect();
            kept.sort();
            kept.dedup();
            let size = size_of(&kept, terms);
            if size < best.2 {
                best = (i, j, size);
            }
        }
    }
    (best.0, best.1)
}

/// `a` and `b` contracted over the labels they share that `keep` does not
/// keep, as one batched product `[batch, left, summed] · [batch, summed,
/// right]`; the result's labels are batch, left, right.
fn contract<D: CoreDevice, F: FloatElement>(
    a: Term<D, F>,
    b: Term<D, F>,
    keep: impl Fn(&Label) -> bool,
) -> Result<Term<D, F>> {
    let shared = |l: &Label| a.labels.contains(l) && b.labels.contains(l);
    let batch: Vec<Label> = a.labels.iter().copied().filter(|l| shared(l) && keep(l)).collect();
    let summed: Vec<Label> = a.labels.iter().copied().filter(|l| shared(l) && !keep(l)).collect();
    let left: Vec<Label> = a.labels.iter().copied().filter(|l| !shared(l)).collect();
    let right: Vec<Label> = b.labels.iter().copied().filter(|l| !shared(l)).collect();
    let arrange = |t: &Term<D, F>, groups: [&[Label]; 3]| -> Result<Tensor<D, F>> {
        let order: Vec<usize> = groups
            .iter()
            .flat_map(|g| g.iter())
            .map(|l| t.labels.iter().position(|m| m == l).expect("own label"))
            .collect();
        let sizes: Vec<usize> = groups
            .iter()
            .map(|g| {
                g.iter().map(|l| t.tensor.dims()[t.labels.iter().position(|m| m == l).expect("own label")]).product()
            })
            .collect();
        t.tensor.try_permute(order)?.try_reshape(sizes)
    };
    let product = arrange(&a, [&batch, &left, &summed])?.try_matmul(&arrange(&b, [&batch, &summed, &right])?)?;
    let dim = |t: &Term<D, F>, l: &Label| t.tensor.dims()[t.labels.iter().position(|m| m == l).expect("own label")];
    let dims: Vec<usize> =
        batch.iter().chain(&left).map(|l| dim(&a, l)).chain(right.iter().map(|l| dim(&b, l))).collect();
    let labels = batch.into_iter().chain(left).chain(right).collect();
    Ok(Term { tensor: product.try_reshape(dims)?, labels })
}
