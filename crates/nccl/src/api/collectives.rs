//! The collectives and point-to-point calls, each one safe method.

use super::{missing, Communicator};
use crate::cuda::{DevicePtr, Stream};
use crate::error::NcclError;
use crate::ffi::{self, Nccl, RedOpId};
use collbench_core::DataType;

impl Nccl {
    /// ncclAllReduce
    #[allow(clippy::too_many_arguments)]
    pub fn all_reduce(
        &self,
        send: DevicePtr,
        recv: DevicePtr,
        count: usize,
        dt: DataType,
        op: RedOpId,
        comm: &Communicator,
        s: &Stream,
    ) -> Result<(), NcclError> {
        // SAFETY: device buffers, a live or null communicator and a live
        // stream (see the module doc); NCCL only queues work on `s`.
        let r = unsafe {
            (self.all_reduce)(
                send.as_raw(),
                recv.as_raw(),
                count,
                ffi::dtype_id(dt),
                op,
                comm.0,
                s.raw(),
            )
        };
        self.check("ncclAllReduce", r)
    }

    /// ncclAllGather
    pub fn all_gather(
        &self,
        send: DevicePtr,
        recv: DevicePtr,
        count: usize,
        dt: DataType,
        comm: &Communicator,
        s: &Stream,
    ) -> Result<(), NcclError> {
        // SAFETY: as in `all_reduce`.
        let r = unsafe {
            (self.all_gather)(
                send.as_raw(),
                recv.as_raw(),
                count,
                ffi::dtype_id(dt),
                comm.0,
                s.raw(),
            )
        };
        self.check("ncclAllGather", r)
    }

    /// ncclReduceScatter
    #[allow(clippy::too_many_arguments)]
    pub fn reduce_scatter(
        &self,
        send: DevicePtr,
        recv: DevicePtr,
        count: usize,
        dt: DataType,
        op: RedOpId,
        comm: &Communicator,
        s: &Stream,
    ) -> Result<(), NcclError> {
        // SAFETY: as in `all_reduce`.
        let r = unsafe {
            (self.reduce_scatter)(
                send.as_raw(),
                recv.as_raw(),
                count,
                ffi::dtype_id(dt),
                op,
                comm.0,
                s.raw(),
            )
        };
        self.check("ncclReduceScatter", r)
    }

    /// ncclBroadcast
    #[allow(clippy::too_many_arguments)]
    pub fn broadcast(
        &self,
        send: DevicePtr,
        recv: DevicePtr,
        count: usize,
        dt: DataType,
        root: usize,
        comm: &Communicator,
        s: &Stream,
    ) -> Result<(), NcclError> {
        // SAFETY: as in `all_reduce`.
        let r = unsafe {
            (self.broadcast)(
                send.as_raw(),
                recv.as_raw(),
                count,
                ffi::dtype_id(dt),
                root as i32,
                comm.0,
                s.raw(),
            )
        };
        self.check("ncclBroadcast", r)
    }

    /// ncclReduce
    #[allow(clippy::too_many_arguments)]
    pub fn reduce(
        &self,
        send: DevicePtr,
        recv: DevicePtr,
        count: usize,
        dt: DataType,
        op: RedOpId,
        root: usize,
        comm: &Communicator,
        s: &Stream,
    ) -> Result<(), NcclError> {
        // SAFETY: as in `all_reduce`.
        let r = unsafe {
            (self.reduce)(
                send.as_raw(),
                recv.as_raw(),
                count,
                ffi::dtype_id(dt),
                op,
                root as i32,
                comm.0,
                s.raw(),
            )
        };
        self.check("ncclReduce", r)
    }

    /// ncclAlltoAll (NCCL >= 2.28; see [`Nccl::native`]).
    pub fn alltoall(
        &self,
        send: DevicePtr,
        recv: DevicePtr,
        count: usize,
        dt: DataType,
        comm: &Communicator,
        s: &Stream,
    ) -> Result<(), NcclError> {
        let f = self.alltoall.ok_or_else(|| missing("ncclAlltoAll"))?;
        // SAFETY: as in `all_reduce`.
        let r = unsafe {
            f(
                send.as_raw(),
                recv.as_raw(),
                count,
                ffi::dtype_id(dt),
                comm.0,
                s.raw(),
            )
        };
        self.check("ncclAlltoAll", r)
    }

    /// ncclGather (NCCL >= 2.28; see [`Nccl::native`]).
    #[allow(clippy::too_many_arguments)]
    pub fn gather(
        &self,
        send: DevicePtr,
        recv: DevicePtr,
        count: usize,
        dt: DataType,
        root: usize,
        comm: &Communicator,
        s: &Stream,
    ) -> Result<(), NcclError> {
        let f = self.gather.ok_or_else(|| missing("ncclGather"))?;
        // SAFETY: as in `all_reduce`.
        let r = unsafe {
            f(
                send.as_raw(),
                recv.as_raw(),
                count,
                ffi::dtype_id(dt),
                root as i32,
                comm.0,
                s.raw(),
            )
        };
        self.check("ncclGather", r)
    }

    /// ncclScatter (NCCL >= 2.28; see [`Nccl::native`]).
    #[allow(clippy::too_many_arguments)]
    pub fn scatter(
        &self,
        send: DevicePtr,
        recv: DevicePtr,
        count: usize,
        dt: DataType,
        root: usize,
        comm: &Communicator,
        s: &Stream,
    ) -> Result<(), NcclError> {
        let f = self.scatter.ok_or_else(|| missing("ncclScatter"))?;
        // SAFETY: as in `all_reduce`.
        let r = unsafe {
            f(
                send.as_raw(),
                recv.as_raw(),
                count,
                ffi::dtype_id(dt),
                root as i32,
                comm.0,
                s.raw(),
            )
        };
        self.check("ncclScatter", r)
    }

    /// ncclSend of `count` elements to `peer`.
    pub fn send(
        &self,
        buf: DevicePtr,
        count: usize,
        dt: DataType,
        peer: usize,
        comm: &Communicator,
        s: &Stream,
    ) -> Result<(), NcclError> {
        // SAFETY: as in `all_reduce`.
        let r = unsafe {
            (self.send)(
                buf.as_raw(),
                count,
                ffi::dtype_id(dt),
                peer as i32,
                comm.0,
                s.raw(),
            )
        };
        self.check("ncclSend", r)
    }

    /// ncclRecv of `count` elements from `peer`.
    pub fn recv(
        &self,
        buf: DevicePtr,
        count: usize,
        dt: DataType,
        peer: usize,
        comm: &Communicator,
        s: &Stream,
    ) -> Result<(), NcclError> {
        // SAFETY: as in `all_reduce`.
        let r = unsafe {
            (self.recv)(
                buf.as_raw(),
                count,
                ffi::dtype_id(dt),
                peer as i32,
                comm.0,
                s.raw(),
            )
        };
        self.check("ncclRecv", r)
    }
}
