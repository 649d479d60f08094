//! PyTorch's subscript (`Tensor::i`, `index_put`) and the scatters
//! (`scatter`, `scatter_scalar`, `scatter_reduce`) against plain loops on
//! random shapes (empty ones too), layouts and subscripts, with their
//! gradients by finite differences, and every error message. The values
//! PyTorch gives for the same subscripts are checked in `pytorch.rs`.

use crate::common::*;
use devtensor::ops::index::{IndexItem, Indexer, ScatterReduce, Slice};
use devtensor::{Cpu, Device, Element, Ellipsis, NewAxis, SliceStep, Tensor};
use proptest::prelude::*;

/// A stream of draws from one seed.
struct Draws(u64);

impl Draws {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = splitmix(self.0);
        if n == 0 { 0 } else { self.0 % n }
    }
    /// A whole number in `lo..hi`.
    fn between(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo) as u64) as i64
    }
}

/// One item of a subscript, as the test writes it down.
#[derive(Clone, Debug)]
enum Item {
    Int(i64),
    Slice(Option<i64>, Option<i64>, i64),
    Full,
    New,
    Dots,
    /// Index values and their shape.
    Indices(Vec<i64>, Vec<usize>),
    /// Mask values and their shape.
    Mask(Vec<u8>, Vec<usize>),
}

impl Item {
    fn indexer<D: Device>(&self) -> Indexer<D> {
        match self {
            Item::Int(i) => i.into_indexer(),
            Item::Slice(start, end, step) => Slice { start: *start, end: *end, step: *step }.into_indexer(),
            Item::Full => (..).into_indexer(),
            Item::New => NewAxis.into_indexer(),
            Item::Dots => Ellipsis.into_indexer(),
            Item::Indices(values, dims) => (&Tensor::<D, i64>::from_slice(values, &dims[..])).into_indexer(),
            Item::Mask(values, dims) => (&Tensor::<D, u8>::from_slice(values, &dims[..])).into_indexer(),
        }
    }
}

fn indexers<D: Device>(items: &[Item]) -> Vec<Indexer<D>> {
    items.iter().map(Item::indexer).collect()
}

/// A random valid subscript of a tensor of shape `dims`: per axis an
/// integer (negative or not), a slice (bounds past either end, steps up to
/// 3), `..`, an index tensor (at most two, which broadcast together) or a
/// mask over one or two axes (alone); new axes here and there; a run of
/// `..` sometimes written as `Ellipsis`, and trailing ones sometimes left
/// out.
fn subscript(dims: &[usize], seed: u64) -> Vec<Item> {
    let mut d = Draws(seed);
    let mut items = Vec::new();
    let (mut a, mut tensors, mut masked) = (0, 0usize, false);
    let mut first_len = None;
    while a < dims.len() {
        if d.below(6) == 0 {
            items.push(Item::New);
        }
        let size = dims[a] as i64;
        let item = match d.below(7) {
            0 if size > 0 => Item::Int(d.between(-size, size)),
            1 | 5 => {
                let bound = |d: &mut Draws| if d.below(4) == 0 { None } else { Some(d.between(-7, 8)) };
                Item::Slice(bound(&mut d), bound(&mut d), d.between(1, 4))
            }
            3 if tensors < 2 && !masked && size > 0 => {
                // The first tensor's length, or 1 to broadcast against it.
                let len = match first_len {
                    None => d.below(4) as usize,
                    Some(len) => [len, 1][d.below(2) as usize],
                };
                let rows = if tensors == 0 && d.below(3) == 0 { 2 } else { 1 };
                first_len.get_or_insert(len);
                tensors += 1;
                let shape = if rows == 2 { vec![2, len] } else { vec![len] };
                let values = (0..rows * len).map(|_| d.between(-size, size)).collect();
                Item::Indices(values, shape)
            }
            4 if tensors == 0 && !masked => {
                masked = true;
                let covered = if a + 1 < dims.len() && d.below(2) == 0 { 2 } else { 1 };
                let shape = dims[a..a + covered].to_vec();
                let values = (0..shape.iter().product::<usize>()).map(|_| d.below(2) as u8).collect();
                items.push(Item::Mask(values, shape));
                a += covered;
                continue;
            }
            _ => Item::Full,
        };
        items.push(item);
        a += 1;
    }
    // Either (not both: an `Ellipsis` would then stand for the dropped
    // axes too).
    if d.below(3) == 0 {
        while let Some(Item::Full) = items.last() {
            items.pop();
        }
    } else if d.below(2) == 0 {
        // A run of `..` (maybe empty) as one `Ellipsis`.
        let start = d.below(items.len() as u64 + 1) as usize;
        let run = items[start..].iter().take_while(|i| matches!(i, Item::Full)).count();
        items.splice(start..start + run, [Item::Dots]);
    }
    items
}

/// Python's positions of `start:end:step` on an axis of `size`.
fn slice_positions(size: usize, start: Option<i64>, end: Option<i64>, step: i64) -> Vec<usize> {
    let size = size as i64;
    let clip = |b: Option<i64>, default: i64| match b {
        None => default,
        Some(b) if b < 0 => Ord::max(b + size, 0),
        Some(b) => Ord::min(b, size),
    };
    let (mut p, end) = (clip(start, 0), clip(end, size));
    let mut out = Vec::new();
    while p < end {
        out.push(p as usize);
        p += step;
    }
    out
}

/// What one axis of the result is made of.
enum Group {
    /// Positions along input axis `axis`.
    Axis {
        axis: usize,
        positions: Vec<usize>,
    },
    New,
    /// The broadcast index tensors.
    Picked,
}

/// The flat input position of every element of `x[items]`, in the
/// result's row-major order, and the result's shape, by PyTorch's rules
/// written out: integers fix an axis, slices list positions, index tensors
/// (a mask is its nonzero positions) broadcast together and go where they
/// are, when adjacent, or first.
fn reference(dims: &[usize], items: &[Item]) -> (Vec<usize>, Vec<usize>) {
    // Masks as index tensors; `Ellipsis` and the missing trailing axes as `..`.
    let mut expanded = Vec::new();
    let consumed: usize = items
        .iter()
        .map(|i| match i {
            Item::Mask(_, d) => d.len(),
            Item::New | Item::Dots => 0,
            _ => 1,
        })
        .sum();
    for item in items {
        match item {
            Item::Dots => expanded.extend((0..dims.len() - consumed).map(|_| Item::Full)),
            Item::Mask(values, shape) => {
                let hits: Vec<Vec<usize>> = indices(shape).filter(|i| values[ravel(i, shape)] != 0).collect();
                for j in 0..shape.len() {
                    expanded.push(Item::Indices(hits.iter().map(|h| h[j] as i64).collect(), vec![hits.len()]));
                }
            }
            other => expanded.push(other.clone()),
        }
    }
    let have = expanded.iter().filter(|i| !matches!(i, Item::New)).count();
    expanded.extend((have..dims.len()).map(|_| Item::Full));

    let mut fixed = vec![None; dims.len()];
    let mut groups = Vec::new();
    let mut picks: Vec<(usize, Vec<i64>, Vec<usize>)> = Vec::new();
    let mut axis = 0;
    for item in &expanded {
        match item {
            Item::Int(i) => {
                fixed[axis] = Some(i.rem_euclid(dims[axis] as i64) as usize);
                axis += 1;
            }
            Item::Slice(s, e, step) => {
                groups.push(Group::Axis { axis, positions: slice_positions(dims[axis], *s, *e, *step) });
                axis += 1;
            }
            Item::Full => {
                groups.push(Group::Axis { axis, positions: (0..dims[axis]).collect() });
                axis += 1;
            }
            Item::New => groups.push(Group::New),
            Item::Indices(values, shape) => {
                let size = dims[axis] as i64;
                picks.push((axis, values.iter().map(|v| v.rem_euclid(Ord::max(size, 1))).collect(), shape.clone()));
                groups.push(Group::Picked);
                axis += 1;
            }
            Item::Dots | Item::Mask(..) => unreachable!("expanded above"),
        }
    }
    // The broadcast shape of the index tensors.
    let rank = picks.iter().map(|p| p.2.len()).max().unwrap_or(0);
    let mut broadcast = vec![1usize; rank];
    for (_, _, shape) in &picks {
        for (k, &s) in shape.iter().enumerate() {
            let slot = &mut broadcast[rank - shape.len() + k];
            if s != 1 {
                *slot = s;
            }
        }
    }
    let marks: Vec<usize> =
        groups.iter().enumerate().filter(|(_, g)| matches!(g, Group::Picked)).map(|(k, _)| k).collect();
    let adjacent = marks.windows(2).all(|w| w[1] == w[0] + 1);
    let mut order: Vec<Group> = Vec::new();
    if !marks.is_empty() && !adjacent {
        order.push(Group::Picked);
    }
    for (k, g) in groups.into_iter().enumerate() {
        match g {
            Group::Picked if adjacent && k == marks[0] => order.push(Group::Picked),
            Group::Picked => {}
            other => order.push(other),
        }
    }
    let out_dims: Vec<usize> = order
        .iter()
        .flat_map(|g| match g {
            Group::Axis { positions, .. } => vec![positions.len()],
            Group::New => vec![1],
            Group::Picked => broadcast.clone(),
        })
        .collect();
    let positions = indices(&out_dims)
        .map(|out| {
            let mut at: Vec<usize> = fixed.iter().map(|f| f.unwrap_or(0)).collect();
            let mut k = 0;
            for g in &order {
                match g {
                    Group::Axis { axis, positions } => {
                        at[*axis] = positions[out[k]];
                        k += 1;
                    }
                    Group::New => k += 1,
                    Group::Picked => {
                        let b = &out[k..k + broadcast.len()];
                        for (axis, values, shape) in &picks {
                            let own: Vec<usize> = shape
                                .iter()
                                .enumerate()
                                .map(|(j, &s)| if s == 1 { 0 } else { b[broadcast.len() - shape.len() + j] })
                                .collect();
                            at[*axis] = values[ravel(&own, shape)] as usize;
                        }
                        k += broadcast.len();
                    }
                }
            }
            ravel(&at, dims)
        })
        .collect();
    (positions, out_dims)
}

/// `x.i(items)` and `x.index_put(items, v, accumulate)` against
/// [`reference`], on a tensor laid out as `v` says, with values that
/// broadcast; their gradients by finite differences on the CPU.
fn check_subscript<D: Device>(dims: &[usize], seed: u64, layout: Variant, accumulate: bool) {
    let n: usize = dims.iter().product();
    let data: Vec<f64> = (0..n as u64).map(|i| (splitmix(seed ^ i) % 1000) as f64 / 10.0 - 50.0).collect();
    let x = tensor_with::<D, f64>(&data, dims, layout);
    let items = subscript(dims, seed);
    let (positions, out_dims) = reference(dims, &items);
    let got = x.i(indexers::<D>(&items));
    assert_eq!(got.dims(), out_dims.as_slice(), "shape of x[{items:?}] for {dims:?}");
    assert_eq!(got.to_vec(), positions.iter().map(|&p| data[p]).collect::<Vec<_>>(), "x[{items:?}] for {dims:?}");
    let ints = x.to_dtype::<i64>().i(indexers::<D>(&items));
    assert_eq!(ints.to_vec(), positions.iter().map(|&p| data[p] as i64).collect::<Vec<_>>(), "i64 x[{items:?}]");

    // Values of the result's shape with some axes 1, to broadcast.
    let mut draws = Draws(seed ^ 0x5eed);
    let value_dims: Vec<usize> = out_dims.iter().map(|&d| if draws.below(3) == 0 { 1 } else { d }).collect();
    let values: Vec<f64> = (0..value_dims.iter().product::<usize>()).map(|i| i as f64 + 0.25).collect();
    let v = Tensor::<D, f64>::from_slice(&values, &value_dims[..]);
    let mut want = data.clone();
    for (k, out) in indices(&out_dims).enumerate() {
        let own: Vec<usize> = out.iter().zip(&value_dims).map(|(&o, &s)| if s == 1 { 0 } else { o }).collect();
        let value = values[ravel(&own, &value_dims)];
        let at = positions[k];
        want[at] = if accumulate { want[at] + value } else { value };
    }
    let put = x.index_put(indexers::<D>(&items), &v, accumulate);
    assert_eq!(put.dims(), dims, "index_put {items:?}");
    assert_eq!(put.to_vec(), want, "x[{items:?}] = v (accumulate {accumulate}) for {dims:?}");
    let mut in_place = x.clone();
    in_place.index_put_(indexers::<D>(&items), &v, accumulate);
    assert_eq!(in_place.to_vec(), want, "index_put_ {items:?}");
    assert_eq!(x.to_vec(), data, "index_put_ left the tensor it was copied from unchanged");

    if D::name() == "Cpu" && n > 0 && n <= 48 {
        let xs = &[x.clone(), v.clone()];
        gradcheck::gradcheck("i", &xs[..1], |xs| xs[0].i(indexers::<D>(&items)));
        // Where a position repeats, the last write wins, and PyTorch still
        // gives every write the gradient there (its result is unspecified):
        // finite differences would not agree, so only distinct positions.
        let mut distinct = positions.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if !positions.is_empty() && (accumulate || distinct.len() == positions.len()) {
            gradcheck::gradcheck("index_put", xs, |xs| xs[0].index_put(indexers::<D>(&items), &xs[1], accumulate));
        }
        gradcheck::gradgradcheck("i", &xs[..1], |xs| xs[0].i(indexers::<D>(&items)).square());
    }
}

device_proptests! {
    cases = 64;

    fn subscripts_match_pytorchs_rules<D>(
        dims in shape_maybe_empty(4, 4), seed in any::<u64>(), v in variant(), accumulate in any::<bool>(),
    ) {
        check_subscript::<D>(&dims, seed, v, accumulate);
    }
}

/// `x.scatter_reduce(axis, index, src, reduce, include_self)`, and the
/// plain scatters, written out.
#[allow(clippy::too_many_arguments)] // The scatter's operands and options, as plain values.
fn scatter_reference(
    x: &[f64],
    dims: &[usize],
    axis: usize,
    index: &[i64],
    index_dims: &[usize],
    src: &[f64],
    reduce: Option<ScatterReduce>,
    include_self: bool,
    integer: bool,
) -> Vec<f64> {
    let mut sent: Vec<Vec<f64>> = vec![Vec::new(); x.len()];
    for p in indices(index_dims) {
        let mut q = p.clone();
        q[axis] = index[ravel(&p, index_dims)] as usize;
        sent[ravel(&q, dims)].push(src[ravel(&p, index_dims)]);
    }
    x.iter()
        .zip(&sent)
        .map(|(&own, values)| {
            let Some(reduce) = reduce else {
                return values.last().copied().unwrap_or(own);
            };
            if values.is_empty() {
                return own;
            }
            let mut all = values.clone();
            if include_self {
                all.push(own);
            }
            match reduce {
                ScatterReduce::Sum => all.iter().sum(),
                ScatterReduce::Product => all.iter().product(),
                ScatterReduce::Mean => {
                    let mean = all.iter().sum::<f64>() / all.len() as f64;
                    if integer { mean.floor() } else { mean }
                }
                ScatterReduce::Amax => all.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                ScatterReduce::Amin => all.iter().copied().fold(f64::INFINITY, f64::min),
            }
        })
        .collect()
}

/// A shape, an axis, and an index shape for the scatters (as `gather`'s).
fn scatter_case() -> impl Strategy<Value = (Vec<usize>, usize, Vec<usize>)> {
    prop::collection::vec(0..=4usize, 1..=3).prop_flat_map(|dims| {
        let rank = dims.len();
        (Just(dims.clone()), 0..rank, prop::collection::vec(0..=4usize, rank)).prop_map(|(dims, axis, sizes)| {
            let mut index: Vec<usize> = sizes.iter().zip(&dims).map(|(&s, &d)| s.min(d)).collect();
            index[axis] = if dims[axis] == 0 { 0 } else { sizes[axis] };
            (dims, axis, index)
        })
    })
}

const REDUCTIONS: [ScatterReduce; 5] =
    [ScatterReduce::Sum, ScatterReduce::Product, ScatterReduce::Mean, ScatterReduce::Amax, ScatterReduce::Amin];

/// Every scatter against [`scatter_reference`] in `f64` and `i64`, on
/// small whole numbers (ties, zeros and repeated indices are common), with
/// a source larger than the index; the gradients by finite differences on
/// distinct values.
fn check_scatters<D: Device, E: Element>(case: (Vec<usize>, usize, Vec<usize>), seed: u64, layout: Variant) {
    let (dims, axis, index_dims) = case;
    let mut d = Draws(seed);
    let n: usize = dims.iter().product();
    let m: usize = index_dims.iter().product();
    let small = |d: &mut Draws, len: usize| -> Vec<f64> { (0..len).map(|_| d.between(-3, 4) as f64).collect() };
    let data = small(&mut d, n);
    let index: Vec<i64> = (0..m).map(|_| d.below(dims[axis] as u64) as i64).collect();
    // A source one larger than the index on every axis: only the index's extent is read.
    let src_dims: Vec<usize> = index_dims.iter().map(|s| s + 1).collect();
    let src_data = small(&mut d, src_dims.iter().product());
    let src_read: Vec<f64> = indices(&index_dims).map(|p| src_data[ravel(&p, &src_dims)]).collect();
    let x = tensor_with::<D, E>(&cast_all(&data), &dims, layout);
    let idx = tensor_with::<D, i64>(&index, &index_dims, layout);
    let src = Tensor::<D, E>::from_vec(cast_all(&src_data), &src_dims[..]);
    let a = axis as isize;
    let reference = |reduce, include_self| {
        scatter_reference(&data, &dims, axis, &index, &index_dims, &src_read, reduce, include_self, !E::IS_FLOAT)
    };
    assert_eq!(as_f64(&x.scatter(a, &idx, &src).to_vec()), reference(None, true), "scatter");
    let filled: Vec<f64> = vec![2.0; m];
    let want = scatter_reference(&data, &dims, axis, &index, &index_dims, &filled, None, true, false);
    assert_eq!(
        as_f64(&x.scatter_scalar(a - dims.len() as isize, &idx, E::from_f64(2.0)).to_vec()),
        want,
        "scatter_scalar"
    );
    for reduce in REDUCTIONS {
        for include_self in [true, false] {
            let got = x.scatter_reduce(a, &idx, &src, reduce, include_self);
            assert_eq!(as_f64(&got.to_vec()), reference(Some(reduce), include_self), "{reduce:?} {include_self}");
        }
    }
    if D::name() == "Cpu" && E::IS_FLOAT && m > 0 {
        // Distinct values, so that no maximum is tied and no product is 0.
        let x = Tensor::<D, f64>::from_vec((0..n).map(|i| 1.0 + i as f64 * 0.37).collect(), &dims[..]);
        let s = Tensor::<D, f64>::from_vec(
            (0..src_dims.iter().product::<usize>()).map(|i| 0.9 - i as f64 * 0.29).collect(),
            &src_dims[..],
        );
        let idx = Tensor::<D, i64>::from_slice(&index, &index_dims[..]);
        let xs = &[x, s];
        // Repeated targets: the last write wins, but PyTorch gives every
        // write the gradient (`scatter_gives_every_write_the_gradient`).
        let targets: Vec<Vec<usize>> = indices(&index_dims)
            .map(|mut p| {
                p[axis] = index[ravel(&p, &index_dims)] as usize;
                p
            })
            .collect();
        if targets.iter().enumerate().all(|(k, t)| !targets[..k].contains(t)) {
            gradcheck::gradcheck("scatter", xs, |xs| xs[0].scatter(a, &idx, &xs[1]));
        }
        gradcheck::gradcheck("scatter_scalar", &xs[..1], |xs| xs[0].scatter_scalar(a, &idx, 2.0));
        for reduce in REDUCTIONS {
            for include_self in [true, false] {
                gradcheck::gradcheck(reduce.name(), xs, |xs| {
                    xs[0].scatter_reduce(a, &idx, &xs[1], reduce, include_self)
                });
            }
        }
        gradcheck::gradgradcheck("scatter_reduce prod", xs, |xs| {
            xs[0].scatter_reduce(a, &idx, &xs[1], ScatterReduce::Product, true)
        });
        gradcheck::gradgradcheck("scatter_reduce mean", xs, |xs| {
            xs[0].scatter_reduce(a, &idx, &xs[1], ScatterReduce::Mean, false).square()
        });
    }
}

device_proptests! {
    cases = 48;

    fn scatters_match_plain_loops<D>(case in scatter_case(), seed in any::<u64>(), v in variant()) {
        check_scatters::<D, f64>(case.clone(), seed, v);
        check_scatters::<D, i64>(case, seed, v);
    }
}

/// The product's gradient where a place holds one zero (the others'
/// product) and two (0), as PyTorch's; amax's shared by ties.
fn check_scatter_gradients_at_zeros_and_ties<D: Device>() {
    let x = Tensor::<D, f64>::from_vec(vec![2.0, 5.0], [2]).requires_grad();
    let s = Tensor::<D, f64>::from_vec(vec![0.0, 3.0, 0.0, 0.0, 4.0], [5]).requires_grad();
    let idx = Tensor::<D, i64>::from_vec(vec![0, 0, 1, 1, 1], [5]);
    let y = x.scatter_reduce(0, &idx, &s, ScatterReduce::Product, true);
    assert_eq!(y.to_vec(), vec![0.0, 0.0]);
    let g = y.sum().backward();
    assert_eq!(g.get(&x).unwrap().to_vec(), vec![0.0, 0.0]);
    assert_eq!(g.get(&s).unwrap().to_vec(), vec![6.0, 0.0, 0.0, 0.0, 0.0]);
    let t = Tensor::<D, f64>::from_vec(vec![4.0, 1.0, 4.0], [3]).requires_grad();
    let y = Tensor::<D, f64>::from_vec(vec![4.0], [1]).requires_grad();
    let out = y.scatter_reduce(0, &Tensor::<D, i64>::zeros([3]), &t, ScatterReduce::Amax, true);
    let g = out.sum().backward();
    assert_eq!(g.get(&t).unwrap().to_vec(), vec![1.0 / 3.0, 0.0, 1.0 / 3.0]);
    assert_eq!(g.get(&y).unwrap().to_vec(), vec![1.0 / 3.0]);
    // Without include_self, PyTorch still counts the input's tie, and gives
    // it no share.
    let x = Tensor::<D, f64>::from_vec(vec![5.0], [1]).requires_grad();
    let s = Tensor::<D, f64>::from_vec(vec![5.0, 5.0], [2]).requires_grad();
    let g = x.scatter_reduce(0, &Tensor::<D, i64>::zeros([2]), &s, ScatterReduce::Amax, false).sum().backward();
    assert_eq!(g.get(&x).unwrap().to_vec(), vec![0.0]);
    assert_eq!(g.get(&s).unwrap().to_vec(), vec![1.0 / 3.0, 1.0 / 3.0]);
    // A product's second derivative where two zeros meet is refused, as PyTorch's.
    let s = Tensor::<D, f64>::from_vec(vec![0.0, 0.0, 2.0], [3]).requires_grad();
    let y =
        Tensor::<D, f64>::ones([1]).scatter_reduce(0, &Tensor::<D, i64>::zeros([3]), &s, ScatterReduce::Product, true);
    use devtensor::autograd::{GradOptions, try_grad};
    let err = try_grad(&[&y.sum()], [&s], GradOptions::new().create_graph(true));
    assert!(err.is_err_and(|e| e.to_string().contains("two or more zeros")));
    // A u8 mean of 256 values at one place: the count wraps, PyTorch divides by 1.
    let many = Tensor::<D, u8>::ones([256]);
    let mean = Tensor::<D, u8>::zeros([1]).scatter_reduce(
        0,
        &Tensor::<D, i64>::zeros([256]),
        &many,
        ScatterReduce::Mean,
        false,
    );
    assert_eq!(mean.to_vec(), vec![0]);
}

/// Where an index repeats, the last write wins (PyTorch leaves it
/// unspecified), and every write gets the gradient of its place, as in
/// PyTorch (`index_put_`'s and `scatter`'s backward gather it).
fn check_repeated_writes<D: Device>() {
    let x = Tensor::<D, f64>::zeros([3]).requires_grad();
    let v = Tensor::<D, f64>::from_vec(vec![1.0, 2.0, 3.0], [3]).requires_grad();
    let twice = Tensor::<D, i64>::from_vec(vec![2, 0, 2], [3]);
    let put = x.index_put(&twice, &v, false);
    assert_eq!(put.to_vec(), vec![2.0, 0.0, 3.0]);
    let g = (&put * &Tensor::<D, f64>::from_vec(vec![10.0, 20.0, 30.0], [3])).sum().backward();
    assert_eq!(g.get(&v).unwrap().to_vec(), vec![30.0, 10.0, 30.0]);
    assert_eq!(g.get(&x).unwrap().to_vec(), vec![0.0, 20.0, 0.0]);
    let scattered = x.scatter(0, &twice, &v);
    assert_eq!(scattered.to_vec(), vec![2.0, 0.0, 3.0]);
    let g = scattered.sum().backward();
    assert_eq!(g.get(&v).unwrap().to_vec(), vec![1.0, 1.0, 1.0]);
}

/// Every refusal names the op, the shapes and what to change.
fn check_subscript_errors<D: Device>() {
    let x = Tensor::<D, f64>::zeros([2, 3]);
    let message = |r: devtensor::Result<Tensor<D, f64>>| r.unwrap_err().to_string().replace(&D::name(), "D");
    assert_eq!(message(x.try_i((0, 3))), "index on D: index 3 is out of range for axis 1 of size 3 (shape [2, 3])");
    assert_eq!(message(x.try_i(-3)), "index on D: index -3 is out of range for axis 0 of size 2 (shape [2, 3])");
    let rows = Tensor::<D, i64>::from_vec(vec![0, -3], [2]);
    assert_eq!(message(x.try_i(&rows)), "index on D: index -3 is out of range for axis 0 of size 2 (shape [2, 3])");
    assert_eq!(
        message(x.try_i((0, 0, 0))),
        "index on D: shape [2, 3]: too many indices for a tensor of rank 2: 3 were given"
    );
    assert_eq!(
        message(x.try_i((Ellipsis, 0, Ellipsis))),
        "index on D: shape [2, 3]: an index can only have a single ellipsis"
    );
    assert_eq!(
        message(x.try_i((.., Slice { start: None, end: None, step: 0 }))),
        "index on D: shape [2, 3]: slice step must be at least 1, got 0"
    );
    let mask = Tensor::<D, u8>::ones([3]);
    assert_eq!(
        message(x.try_i(&mask)),
        "index on D: shapes [2, 3] and [3]: the mask must have the shape of the axes it indexes, [2] from axis 0"
    );
    let (a, b) = (Tensor::<D, i64>::zeros([2]), Tensor::<D, i64>::zeros([3]));
    assert_eq!(
        message(x.try_i((&a, &b))),
        "index on D: shapes [2] and [3]: the index tensors do not broadcast together"
    );
    assert_eq!(
        message(x.try_index_put((.., 1..), &Tensor::<D, f64>::zeros([3]), false)),
        "index_put on D: shapes [2, 3], [3] and [2, 2]: the values do not broadcast to the shape they are put at, [2, 2]"
    );
    let mut w = Tensor::<D, f64>::zeros([2]).requires_grad();
    let err = w.try_index_put_(0, &Tensor::<D, f64>::scalar(1.0), false).unwrap_err().to_string();
    assert!(err.starts_with("index_put_ on") && err.contains("inside `no_grad`"), "{err}");
    devtensor::no_grad(|| w.index_put_(0, &Tensor::<D, f64>::scalar(1.0), false));
    assert_eq!(w.to_vec(), vec![1.0, 0.0]);
    // A rank-0 index tensor is an integer; a rank-0 mask a new axis.
    let cube = Tensor::<D, f64>::zeros([3, 4, 5]);
    let one = Tensor::<D, i64>::scalar(-2);
    assert_eq!(cube.i((&one, .., &Tensor::<D, i64>::from_vec(vec![0, 3], [2]))).dims(), &[4, 2]);
    assert_eq!(cube.i(&Tensor::<D, u8>::scalar(1)).dims(), &[1, 3, 4, 5]);
    assert_eq!(cube.i((.., &Tensor::<D, u8>::scalar(0))).dims(), &[3, 0, 4, 5]);
    assert_eq!(
        message(cube.try_i(&Tensor::<D, i64>::scalar(3))),
        "index on D: index 3 is out of range for axis 0 of size 3 (shape [3, 4, 5])"
    );
    // A huge step keeps one element; an index near i64::MAX is an error.
    assert_eq!(cube.i((.., Slice { start: None, end: None, step: i64::MAX })).dims(), &[3, 1, 5]);
    let far = Tensor::<D, i64>::from_vec(vec![i64::MAX - 1], [1]);
    assert!(message(cube.try_i(&far)).contains(&format!("index {} is out of range", i64::MAX - 1)));
    // Values lose their leading axes of size 1, as in PyTorch's `x[0] = ones(1, 3)`.
    let put = x.index_put(0, &Tensor::<D, f64>::ones([1, 3]), false);
    assert_eq!(put.to_vec2(), vec![vec![1.0; 3], vec![0.0; 3]]);
    // The PyTorch lines of issue 60, each one line.
    let logits = Tensor::<D, f64>::from_vec((0..24).map(f64::from).collect(), [2, 3, 4]);
    assert_eq!(logits.i((.., -1, ..)).to_vec2(), vec![vec![8.0, 9.0, 10.0, 11.0], vec![20.0, 21.0, 22.0, 23.0]]);
    assert_eq!(logits.select(1, -1).to_vec(), logits.i((.., -1, ..)).to_vec());
    assert_eq!(logits.narrow(-1, -2, 2).to_vec(), logits.i((.., .., -2..)).to_vec());
}

device_tests! {
    scatter_gradients_at_zeros_and_ties => check_scatter_gradients_at_zeros_and_ties,
    subscript_errors_name_the_problem => check_subscript_errors,
    scatter_gives_every_write_the_gradient => check_repeated_writes,
}

#[test]
fn basic_subscripts_are_views() {
    // A basic subscript is a view: the input's layout, offset and with
    // strides scaled; an index tensor's result is a fresh, dense copy.
    let x = Tensor::<Cpu, f64>::zeros([4, 6]);
    let v = x.i((1.., (..).step(2)));
    assert_eq!(v.layout().strides(), &[6, 2]);
    assert_eq!(v.layout().offset(), 6);
    let copy = x.i((.., &Tensor::<Cpu, i64>::from_vec(vec![0, 2], [2])));
    assert!(copy.is_contiguous());
}
