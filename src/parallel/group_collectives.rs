//! Collectives a program calls on its [`ProcessGroup`] (PyTorch's
//! `dist.all_reduce`, `broadcast`, `all_gather`, `reduce_scatter_tensor`,
//! `barrier`): an evaluation metric summed over the ranks, rank 0's
//! checkpoint handed to every rank, each rank's share of a sharded tensor.
//!
//! The tensors are typed on the group's GPU `D`, so a tensor on any other
//! device does not compile. What the types cannot see, that every rank
//! makes the same call with a tensor of the same shape and element type, is
//! checked before each collective: the ranks first gather a short
//! description of their call (one small fixed-size all-gather, and a wait
//! for the GPU), and where one differs every rank returns the same
//! [`Error::Distributed`] naming it, where NCCL would wait until the job's
//! timeout or return garbage. The check sees only these calls, not a
//! training step's own collectives.

use super::process_group::ProcessGroup;
use crate::backend::Backend;
use crate::backend::cuda::nccl::{NcclBuffer, NcclOp, NcclRank};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::Shape;
use crate::tensor::{Device, Tensor};
use devtensor_macros::fallible;

/// How a reducing collective combines the ranks' values (PyTorch's
/// `dist.ReduceOp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// The sum (`ReduceOp.SUM`, PyTorch's default); integers wrap, as on
    /// the GPU.
    Sum,
    /// The mean over the ranks (`ReduceOp.AVG`); floating-point types only.
    Avg,
    /// The product (`ReduceOp.PRODUCT`).
    Product,
    /// The largest value (`ReduceOp.MAX`).
    Max,
    /// The smallest value (`ReduceOp.MIN`).
    Min,
}

impl ReduceOp {
    fn nccl(self) -> NcclOp {
        match self {
            ReduceOp::Sum => NcclOp::ncclSum,
            ReduceOp::Avg => NcclOp::ncclAvg,
            ReduceOp::Product => NcclOp::ncclProd,
            ReduceOp::Max => NcclOp::ncclMax,
            ReduceOp::Min => NcclOp::ncclMin,
        }
    }
}

/// Bytes of the description each rank shows the others before a
/// collective: room for any call on a tensor of up to a dozen dimensions.
const DESCRIPTION_BYTES: usize = 160;

/// The description of a call on `t`, in words, padded to
/// [`DESCRIPTION_BYTES`]; a longer one is cut and ends in a digest of the
/// whole, so that two descriptions are equal exactly when the calls are.
fn description<D: Device, E: Element>(call: &str, t: &Tensor<D, E>) -> Vec<u8> {
    let text = format!("`{call}` on a tensor of shape {} and type {}", t.shape(), E::DTYPE.name());
    let mut bytes = text.into_bytes();
    if bytes.len() > DESCRIPTION_BYTES {
        let digest = bytes
            .iter()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
        bytes.truncate(DESCRIPTION_BYTES - 24);
        bytes.extend(format!(".. (#{digest:016x})").bytes());
    }
    bytes.resize(DESCRIPTION_BYTES, 0);
    bytes
}

fn words(description: &[u8]) -> String {
    let end = description.iter().position(|&b| b == 0).unwrap_or(description.len());
    String::from_utf8_lossy(&description[..end]).into_owned()
}

/// A fresh dense copy of `t`, which a collective may overwrite in place.
pub(crate) fn dense_copy<D: Device, E: Element>(t: &Tensor<D, E>) -> Result<Tensor<D, E>> {
    let storage = D::enter(|| D::Core::copy_strided(t.storage(), t.layout()))?;
    Ok(Tensor::from_storage(storage, t.shape().clone()))
}

impl<D: Device> ProcessGroup<D> {
    /// The buffer NCCL reads and writes of a dense tensor on this group's GPU.
    fn buffer<E: Element>(&self, t: &Tensor<D, E>, op: &'static str) -> Result<NcclBuffer> {
        NcclBuffer::of(t.storage(), op, &D::name())
    }

    /// One collective as every rank runs it: begun (so that a rank that
    /// has left is named), agreed (the same call on every rank), refused
    /// alike on every rank when `refusal` says why, then `body` queued and
    /// waited for, so that the result is whole when it is returned. Any
    /// other error of this rank stops the job, so that no rank waits for
    /// this one.
    fn collective<E: Element, T>(
        &self,
        op: &'static str,
        call: &str,
        t: &Tensor<D, E>,
        refusal: Option<String>,
        body: impl FnOnce(&NcclRank) -> Result<T>,
    ) -> Result<T> {
        self.begin_operation()?;
        match self.agree(call, t) {
            Ok(None) => {}
            Ok(Some(mismatch)) => return Err(mismatch),
            Err(e) => return Err(self.stopping(e)),
        }
        if let Some(reason) = refusal {
            return Err(Error::Argument { op, device: D::name(), reason });
        }
        let done = (|| {
            let comm = self.comm()?;
            let out = body(comm)?;
            comm.finish()?;
            // NCCL's own error means something once the collective has run.
            comm.synchronize()?;
            self.check()?;
            comm.check()?;
            Ok(out)
        })();
        done.map_err(|e| self.stopping(e))
    }

    /// Gathers every rank's description of the call it is making: the
    /// error every rank returns alike when one differs from rank 0's,
    /// `None` when all agree.
    fn agree<E: Element>(&self, call: &str, t: &Tensor<D, E>) -> Result<Option<Error>> {
        let op = "collective";
        let world = self.world_size();
        let comm = self.comm()?;
        let shown = Tensor::<D, u8>::try_from_slice(&description(call, t), [DESCRIPTION_BYTES])?;
        let all = Tensor::<D, u8>::try_zeros([world * DESCRIPTION_BYTES])?;
        comm.all_gather(&self.buffer(&shown, op)?, &self.buffer(&all, op)?, world)?;
        comm.finish()?;
        let all = all.try_to_vec()?;
        self.check()?;
        comm.check()?;
        let of = |r: usize| &all[r * DESCRIPTION_BYTES..(r + 1) * DESCRIPTION_BYTES];
        Ok((1..world).find(|&r| of(r) != of(0)).map(|other| Error::Distributed {
            rank: Some(other),
            reason: format!(
                "it called {} where rank 0 called {}; every rank must make the same collective calls in the same \
                 order, with tensors of the same shape and element type",
                words(of(other)),
                words(of(0))
            ),
        }))
    }

    /// Why a mean of integers is refused (NCCL would round it toward zero).
    fn refuse_op<E: Element>(op: ReduceOp) -> Option<String> {
        (op == ReduceOp::Avg && !E::DTYPE.is_float()).then(|| {
            format!("ReduceOp::Avg of {} would round each mean; use ReduceOp::Sum and divide", E::DTYPE.name())
        })
    }

    /// `t` combined over every rank by `op` (PyTorch's
    /// `dist.all_reduce(t, op)`, which works in place; here the result is a
    /// new tensor of `t`'s shape, as PyTorch's functional collectives
    /// return it). Every rank must call it with a tensor of the same shape
    /// and type. The result is not part of the autograd graph.
    ///
    /// Fails with [`Error::Distributed`] when the ranks' calls differ
    /// (naming the first rank whose call differs from rank 0's, on every
    /// rank) or another rank failed, and with [`Error::Argument`] for
    /// [`ReduceOp::Avg`] of integers.
    ///
    /// ```no_run
    /// use devtensor::parallel::{Job, ProcessGroup, ReduceOp};
    /// use devtensor::{Device, Result, Tensor};
    ///
    /// fn mean_accuracy<D: Device>(group: &ProcessGroup<D>, correct: f32, seen: f32) -> Result<f32> {
    ///     let counts = Tensor::<D>::try_from_slice(&[correct, seen], [2])?;
    ///     let total = group.try_all_reduce(&counts, ReduceOp::Sum)?.try_to_vec()?;
    ///     Ok(total[0] / total[1])
    /// }
    /// ```
    #[fallible]
    pub fn all_reduce<E: Element>(&self, t: &Tensor<D, E>, op: ReduceOp) -> Tensor<D, E> {
        let name = "all_reduce";
        self.collective(name, &format!("all_reduce({op:?})"), t, Self::refuse_op::<E>(op), |comm| {
            let out = dense_copy(t)?;
            comm.all_reduce(&self.buffer(&out, name)?, op.nccl())?;
            Ok(out)
        })
    }

    /// Rank `src`'s `t`, on every rank (PyTorch's `dist.broadcast(t, src)`,
    /// in place there; a new tensor here). Every rank passes a tensor of
    /// the same shape and type; only `src`'s values matter. Not part of
    /// the autograd graph. Fails as [`all_reduce`](Self::all_reduce), and
    /// with [`Error::Argument`] when `src` is not a rank of the group.
    ///
    /// ```no_run
    /// use devtensor::parallel::ProcessGroup;
    /// use devtensor::{Device, Result, Tensor};
    ///
    /// /// The seed rank 0 chose, on every rank.
    /// fn shared_seed<D: Device>(group: &ProcessGroup<D>, mine: i64) -> Result<i64> {
    ///     let seed = Tensor::<D, i64>::try_from_slice(&[mine], [1])?;
    ///     Ok(group.try_broadcast(&seed, 0)?.try_to_vec()?[0])
    /// }
    /// ```
    #[fallible]
    pub fn broadcast<E: Element>(&self, t: &Tensor<D, E>, src: usize) -> Tensor<D, E> {
        let name = "broadcast";
        let world = self.world_size();
        let refusal = (src >= world).then(|| format!("src={src}, but the group's ranks are 0..{world}"));
        self.collective(name, &format!("broadcast(src={src})"), t, refusal, |comm| {
            let out = dense_copy(t)?;
            comm.broadcast(&self.buffer(&out, name)?, src)?;
            Ok(out)
        })
    }

    /// Every rank's `t`, in rank order, as one tensor (PyTorch's
    /// `dist.all_gather_into_tensor`): the ranks' tensors concatenated
    /// along the first axis (`[world_size * n, ..]` for tensors of shape
    /// `[n, ..]`; `[world_size]` for rank-0 tensors). Every rank passes a
    /// tensor of the same shape and type. Not part of the autograd graph;
    /// fails as [`all_reduce`](Self::all_reduce).
    #[fallible]
    pub fn all_gather_into_tensor<E: Element>(&self, t: &Tensor<D, E>) -> Tensor<D, E> {
        let name = "all_gather_into_tensor";
        let world = self.world_size();
        let mut dims = t.dims().to_vec();
        match dims.first_mut() {
            Some(first) => *first *= world,
            None => dims.push(world),
        }
        self.collective(name, "all_gather", t, None, |comm| {
            let send = dense_copy(t)?;
            let out = Tensor::<D, E>::try_zeros(Shape::from(dims))?;
            comm.all_gather(&self.buffer(&send, name)?, &self.buffer(&out, name)?, world)?;
            Ok((send, out))
        })
        .map(|(_, out)| out)
    }

    /// Every rank's `t`, in rank order (PyTorch's `dist.all_gather`, which
    /// fills a list of tensors), each of `t`'s shape. Gathered by one
    /// collective; the tensors are views of one buffer. Fails as
    /// [`all_reduce`](Self::all_reduce).
    ///
    /// ```no_run
    /// use devtensor::parallel::ProcessGroup;
    /// use devtensor::{Device, Result, Tensor};
    ///
    /// /// Each rank's last loss, on every rank.
    /// fn losses<D: Device>(group: &ProcessGroup<D>, loss: f32) -> Result<Vec<f32>> {
    ///     let mine = Tensor::<D>::try_from_slice(&[loss], [1])?;
    ///     group.try_all_gather(&mine)?.iter().map(|t| t.try_item()).collect()
    /// }
    /// ```
    #[fallible]
    pub fn all_gather<E: Element>(&self, t: &Tensor<D, E>) -> Vec<Tensor<D, E>> {
        let world = self.world_size();
        let gathered = self.try_all_gather_into_tensor(t)?;
        let mut stacked = vec![world];
        stacked.extend_from_slice(t.dims());
        let stacked = gathered.try_reshape(stacked)?;
        (0..world).map(|r| stacked.try_select(0, r)).collect()
    }

    /// This rank's share of every rank's `t` combined by `op` (PyTorch's
    /// `dist.reduce_scatter_tensor`): `t`'s first axis is cut into
    /// `world_size` equal parts, part `r` of the combination goes to rank
    /// `r`, so a tensor of shape `[world_size * n, ..]` gives `[n, ..]`.
    /// Every rank passes a tensor of the same shape and type. Not part of
    /// the autograd graph. Fails as [`all_reduce`](Self::all_reduce), and
    /// with [`Error::Argument`] when the first axis does not split evenly.
    #[fallible]
    pub fn reduce_scatter_tensor<E: Element>(&self, t: &Tensor<D, E>, op: ReduceOp) -> Tensor<D, E> {
        let name = "reduce_scatter_tensor";
        let world = self.world_size();
        let mut dims = t.dims().to_vec();
        let uneven = match dims.first_mut() {
            Some(first) if first.is_multiple_of(world) => {
                *first /= world;
                None
            }
            _ => Some(format!(
                "a tensor of shape {} does not split into {world} equal parts along its first axis",
                t.shape()
            )),
        };
        let refusal = uneven.or_else(|| Self::refuse_op::<E>(op));
        self.collective(name, &format!("reduce_scatter_tensor({op:?})"), t, refusal, |comm| {
            let send = dense_copy(t)?;
            let out = Tensor::<D, E>::try_zeros(Shape::from(dims))?;
            comm.reduce_scatter(&self.buffer(&send, name)?, &self.buffer(&out, name)?, op.nccl(), world)?;
            Ok((send, out))
        })
        .map(|(_, out)| out)
    }
}
