//! The collectives and point-to-point calls, each one safe method.

use super::{missing, Communicator};
use crate::cuda::{DevicePtr, Stream};
use crate::error::NcclError;
use crate::ffi::{self, Nccl, RedOpId};
use collbench_core::DataType;

/// Writes one safe method per NCCL call. Every call takes its device
/// buffers, then `count` and the data type, then the arguments listed after
/// the `;` (each with the expression that turns it into what C takes), then
/// the communicator and stream. `required` calls are resolved at load time;
/// `since_2_28` ones are `Option`s (see [`Nccl::native`]).
macro_rules! nccl_call {
    ($(#[$doc:meta])* required $method:ident, $symbol:literal, $($rest:tt)*) => {
        nccl_call!(@method $(#[$doc])* $method, $symbol,
            |n: &Nccl| Ok::<_, NcclError>(n.$method), $($rest)*);
    };
    ($(#[$doc:meta])* since_2_28 $method:ident, $symbol:literal, $($rest:tt)*) => {
        nccl_call!(@method $(#[$doc])* $method, $symbol,
            |n: &Nccl| n.$method.ok_or_else(|| missing($symbol)), $($rest)*);
    };
    (@method $(#[$doc:meta])* $method:ident, $symbol:literal, $lookup:expr,
     ($($buf:ident),+; $($arg:ident: $ty:ty => $raw:expr),*)) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        pub fn $method(
            &self,
            $($buf: DevicePtr,)+
            count: usize,
            dt: DataType,
            $($arg: $ty,)*
            comm: &Communicator,
            s: &Stream,
        ) -> Result<(), NcclError> {
            let f = ($lookup)(self)?;
            // SAFETY: device buffers, a live or null communicator and a live
            // stream (see the module doc); NCCL only queues work on `s`.
            let r = unsafe {
                f(
                    $($buf.as_raw(),)+
                    count,
                    ffi::dtype_id(dt),
                    $($raw,)*
                    comm.0,
                    s.raw(),
                )
            };
            self.check($symbol, r)
        }
    };
}

impl Nccl {
    nccl_call!(
        /// ncclAllReduce
        required all_reduce, "ncclAllReduce", (send, recv; op: RedOpId => op)
    );
    nccl_call!(
        /// ncclAllGather
        required all_gather, "ncclAllGather", (send, recv;)
    );
    nccl_call!(
        /// ncclReduceScatter
        required reduce_scatter, "ncclReduceScatter", (send, recv; op: RedOpId => op)
    );
    nccl_call!(
        /// ncclBroadcast
        required broadcast, "ncclBroadcast", (send, recv; root: usize => root as i32)
    );
    nccl_call!(
        /// ncclReduce
        required reduce, "ncclReduce",
        (send, recv; op: RedOpId => op, root: usize => root as i32)
    );
    nccl_call!(
        /// ncclAlltoAll (NCCL >= 2.28; see [`Nccl::native`]).
        since_2_28 alltoall, "ncclAlltoAll", (send, recv;)
    );
    nccl_call!(
        /// ncclGather (NCCL >= 2.28; see [`Nccl::native`]).
        since_2_28 gather, "ncclGather", (send, recv; root: usize => root as i32)
    );
    nccl_call!(
        /// ncclScatter (NCCL >= 2.28; see [`Nccl::native`]).
        since_2_28 scatter, "ncclScatter", (send, recv; root: usize => root as i32)
    );
    nccl_call!(
        /// ncclSend of `count` elements to `peer`.
        required send, "ncclSend", (buf; peer: usize => peer as i32)
    );
    nccl_call!(
        /// ncclRecv of `count` elements from `peer`.
        required recv, "ncclRecv", (buf; peer: usize => peer as i32)
    );
}

impl Nccl {
    /// One alltoallv from `rank`'s side, as nccl-tests issues it (see
    /// [`crate::alltoallv::issue`]): `peers` says how many elements go
    /// where, `send` and `recv` are this rank's buffers.
    #[allow(clippy::too_many_arguments)]
    pub fn alltoallv(
        &self,
        peers: &collbench_core::alltoallv::PeerCounts,
        rank: usize,
        send: DevicePtr,
        recv: DevicePtr,
        dt: DataType,
        comm: &Communicator,
        s: &Stream,
    ) -> Result<(), NcclError> {
        let p2p = crate::alltoallv::P2p {
            send: self.send,
            recv: self.recv,
            group_start: self.group_start,
            group_end: self.group_end,
        };
        // SAFETY: the entry points are NCCL's own; `send` and `recv` are
        // device addresses (see the module doc) that the backend sized for
        // the busiest rank's totals, a live or null communicator and a
        // live stream; NCCL only queues work on `s`.
        let r = unsafe {
            crate::alltoallv::issue(
                &p2p,
                peers,
                rank,
                send.as_raw(),
                recv.as_raw(),
                dt.size_bytes(),
                ffi::dtype_id(dt),
                comm.0,
                s.raw(),
            )
        };
        r.map_err(|e| self.error(e.call, e.code))
    }
}
