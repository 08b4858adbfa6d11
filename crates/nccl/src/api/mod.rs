//! Safe methods over [`Nccl`]'s entry points: one per NCCL call, each
//! holding its `unsafe` block, so the backend is safe Rust.
//!
//! Soundness rests on three things the types keep:
//! - communicators are [`Communicator`]s, made only by ncclCommInit* and
//!   nulled when destroyed or aborted, so no call sees a freed one (a null
//!   one fails NCCL's argument checks; the backend issues nothing after an
//!   abort anyway);
//! - buffers are [`DevicePtr`]s, device addresses NCCL dereferences on the
//!   GPU only (an address outside an allocation is a CUDA error there);
//! - host memory NCCL reads or writes is a Rust value or slice of the
//!   size the call expects, alive for the call.
//!
//! Every safe method is here, in one `impl Nccl` (the collectives' are
//! written by `call.rs`'s macro); the handles they take are in `types.rs`.

#[macro_use]
mod call;
mod types;

use types::missing;
pub use types::{is_created_op, Communicator, NativeOps, Registration, Window};

use crate::cuda::{DeviceBuffer, DevicePtr, Stream};
use crate::dev_comm::{DevComm, DevCommRequirements};
use crate::error::NcclError;
use crate::ffi::{self, Comm, Config, Nccl, NcclResult, RedOpId, UniqueId};
use crate::group::{Group, GroupApi};
use collbench_core::DataType;
use std::ffi::{c_void, CStr};

/// Reads a C string NCCL returned (static storage in the library).
fn text(p: *const std::ffi::c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null strings from ncclGetErrorString/ncclGetLastError
    // are NUL-terminated and owned by the library, which is never unloaded.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    Some(s).filter(|s| !s.is_empty())
}

impl Nccl {
    /// The error of call `what` that returned `r`, in NCCL's own words
    /// (ncclGetErrorString and, where there is one, ncclGetLastError).
    pub fn error(&self, what: &str, r: NcclResult) -> NcclError {
        // SAFETY: ncclGetErrorString takes any result code by value.
        let msg = text(unsafe { (self.get_error_string)(r) });
        // SAFETY: ncclGetLastError only reads its communicator argument,
        // and NULL asks for the last error of any communicator; it returns
        // a library-owned string (see `text`).
        let last = self
            .get_last_error
            .and_then(|f| text(unsafe { f(std::ptr::null_mut()) }));
        NcclError::Call {
            call: what.to_string(),
            code: r,
            text: msg.unwrap_or_else(|| format!("error {r}")),
            last,
        }
    }

    /// `Ok` when `r` is ncclSuccess, else [`Nccl::error`].
    pub fn check(&self, what: &str, r: NcclResult) -> Result<(), NcclError> {
        if r == ffi::NCCL_SUCCESS {
            Ok(())
        } else {
            Err(self.error(what, r))
        }
    }

    /// The collectives this library has natively.
    pub fn native(&self) -> NativeOps {
        NativeOps {
            alltoall: self.alltoall.is_some(),
            gather: self.gather.is_some(),
            scatter: self.scatter.is_some(),
        }
    }

    /// ncclRedOpCreatePreMulSum is there (NCCL >= 2.11).
    pub fn has_pre_mul_sum(&self) -> bool {
        self.red_op_create_pre_mul_sum.is_some()
    }

    /// ncclGetUniqueId: a new id for a communicator across processes.
    pub fn get_unique_id(&self) -> Result<UniqueId, NcclError> {
        let mut id = UniqueId { internal: [0; 128] };
        // SAFETY: `id` is a valid, writable ncclUniqueId.
        self.check("ncclGetUniqueId", unsafe { (self.get_unique_id)(&mut id) })?;
        Ok(id)
    }

    /// ncclCommInitAll: one communicator per device of `devs`, all in this
    /// process.
    pub fn comm_init_all(&self, devs: &[i32]) -> Result<Vec<Communicator>, NcclError> {
        let mut comms = vec![std::ptr::null_mut(); devs.len()];
        // SAFETY: NCCL writes `devs.len()` communicators into `comms`, which
        // has that many slots, and reads `devs.len()` ordinals from `devs`.
        let r =
            unsafe { (self.comm_init_all)(comms.as_mut_ptr(), devs.len() as i32, devs.as_ptr()) };
        self.check("ncclCommInitAll", r)?;
        Ok(comms.into_iter().map(Communicator).collect())
    }

    /// ncclCommInitRank for each of this process's `ranks` of `nranks`,
    /// in one group (they are collective); `before_each(i)` runs before
    /// the i-th (binding its GPU). With a `config`, ncclCommInitRankConfig
    /// (NCCL >= 2.14) takes it instead, as nccl-tests does.
    pub fn comm_init_ranks<E: From<NcclError>>(
        &self,
        nranks: usize,
        id: UniqueId,
        ranks: &[usize],
        config: Option<Config>,
        mut before_each: impl FnMut(usize) -> Result<(), E>,
    ) -> Result<Vec<Communicator>, E> {
        let init_config = match config {
            Some(_) => Some(
                self.comm_init_rank_config
                    .ok_or_else(|| missing("ncclCommInitRankConfig"))?,
            ),
            None => None,
        };
        // Inside a group NCCL keeps each out-pointer and may write the
        // communicator through it up to ncclGroupEnd, so the slots (and
        // the configs NCCL is handed) are made before the group, never
        // move, and drop after it closes.
        let mut comms: Vec<Comm> = vec![std::ptr::null_mut(); ranks.len()];
        let slots = comms.as_mut_ptr();
        let mut configs: Vec<Config> = config.into_iter().cycle().take(ranks.len()).collect();
        let config_slots = configs.as_mut_ptr();
        let group = Group::start(self)?;
        for (i, &rank) in ranks.iter().enumerate() {
            before_each(i)?;
            let r = match init_config {
                Some(f) => {
                    // SAFETY: as below; `config_slots.add(i)` is inside
                    // `configs` (one per rank when a config is given),
                    // which is neither moved nor dropped until the group
                    // has ended, and holds an initialised ncclConfig_t.
                    unsafe {
                        f(
                            slots.add(i),
                            nranks as i32,
                            id,
                            rank as i32,
                            config_slots.add(i),
                        )
                    }
                }
                None => {
                    // SAFETY: `slots.add(i)` is inside `comms` (i <
                    // ranks.len()), which is neither moved nor read until
                    // the group has ended (the guard drops first, on error
                    // paths too); the id is passed by value.
                    unsafe { (self.comm_init_rank)(slots.add(i), nranks as i32, id, rank as i32) }
                }
            };
            self.check(
                if init_config.is_some() {
                    "ncclCommInitRankConfig"
                } else {
                    "ncclCommInitRank"
                },
                r,
            )?;
        }
        group.end()?;
        drop(configs);
        Ok(comms.into_iter().map(Communicator).collect())
    }

    /// ncclCommDestroy; leaves `comm` null.
    pub fn comm_destroy(&self, comm: &mut Communicator) -> Result<(), NcclError> {
        let c = std::mem::replace(comm, Communicator::null());
        // SAFETY: `c` is a live communicator or null (a no-op for NCCL);
        // it was taken out of `comm`, so it is destroyed only once.
        self.check("ncclCommDestroy", unsafe { (self.comm_destroy)(c.0) })
    }

    /// ncclCommAbort (a stuck or failed communicator); leaves `comm` null.
    pub fn comm_abort(&self, comm: &mut Communicator) -> Result<(), NcclError> {
        let c = std::mem::replace(comm, Communicator::null());
        // SAFETY: as in `comm_destroy`.
        self.check("ncclCommAbort", unsafe { (self.comm_abort)(c.0) })
    }

    /// ncclCommGetAsyncError: `Err` when the communicator has failed
    /// (in progress counts as healthy).
    pub fn async_error(&self, comm: &Communicator) -> Result<(), NcclError> {
        let mut r = ffi::NCCL_SUCCESS;
        // SAFETY: a live or null communicator; `r` is a valid out-parameter.
        unsafe { (self.comm_get_async_error)(comm.0, &mut r) };
        if r != ffi::NCCL_SUCCESS && r != ffi::NCCL_IN_PROGRESS {
            return Err(self.error("NCCL communicator", r));
        }
        Ok(())
    }

    /// ncclRedOpCreatePreMulSum with a host scalar of `dt` (`scalar` holds
    /// one element's bytes).
    pub fn pre_mul_sum(
        &self,
        scalar: &[u8],
        dt: DataType,
        comm: &Communicator,
    ) -> Result<RedOpId, NcclError> {
        assert_eq!(scalar.len(), dt.size_bytes(), "one scalar of the data type");
        let create = self
            .red_op_create_pre_mul_sum
            .ok_or_else(|| missing("ncclRedOpCreatePreMulSum"))?;
        let mut op: RedOpId = 0;
        // SAFETY: with ncclScalarHostImmediate NCCL reads one element of
        // `dt` from `scalar` (checked above to be that long) during the
        // call and writes the new operator into `op`. It takes a mutable
        // pointer but does not write through it.
        let r = unsafe {
            create(
                &mut op,
                scalar.as_ptr() as *mut c_void,
                ffi::dtype_id(dt),
                ffi::SCALAR_HOST_IMMEDIATE,
                comm.0,
            )
        };
        self.check("ncclRedOpCreatePreMulSum", r)?;
        Ok(op)
    }

    /// ncclRedOpDestroy of an operator made by [`Nccl::pre_mul_sum`];
    /// built-in operators are left alone.
    pub fn red_op_destroy(&self, op: RedOpId, comm: &Communicator) {
        if !is_created_op(op) {
            return;
        }
        if let Some(destroy) = self.red_op_destroy {
            // SAFETY: `op` was created on `comm` (a live or null
            // communicator); NCCL rejects unknown operators.
            unsafe { destroy(op, comm.0) };
        }
    }

    /// ncclCommRegister is there (`-R 1`).
    pub fn has_comm_register(&self) -> bool {
        self.comm_register.is_some()
    }

    /// ncclCommRegister of the whole of `buf` (`-R 1`).
    pub fn comm_register(
        &self,
        comm: &Communicator,
        buf: &DeviceBuffer,
    ) -> Result<Registration, NcclError> {
        let register = self
            .comm_register
            .ok_or_else(|| missing("ncclCommRegister"))?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: `buf` is a live device allocation of `buf.bytes`; the
        // handle is a valid out-parameter. Callers deregister before the
        // buffer is freed.
        let r = unsafe { register(comm.0, buf.at(0).as_raw(), buf.bytes, &mut handle) };
        self.check("ncclCommRegister", r)?;
        Ok(Registration(handle))
    }

    /// ncclCommDeregister of a handle [`Nccl::comm_register`] made on `comm`.
    pub fn comm_deregister(&self, comm: &Communicator, reg: Registration) {
        if let Some(dereg) = self.comm_deregister {
            // SAFETY: a handle from ncclCommRegister on this communicator,
            // consumed here so it is deregistered once.
            unsafe { dereg(comm.0, reg.0) };
        }
    }

    /// ncclMemAlloc and ncclMemFree are there (`-R 2`).
    pub fn has_mem_alloc(&self) -> bool {
        self.mem_alloc.is_some() && self.mem_free.is_some()
    }

    /// `bytes` (at least 1) of memory NCCL can map into other ranks,
    /// freed with ncclMemFree when the buffer drops.
    pub fn mem_alloc(&self, bytes: usize) -> Result<DeviceBuffer, NcclError> {
        let (Some(alloc), Some(free)) = (self.mem_alloc, self.mem_free) else {
            return Err(missing("ncclMemAlloc"));
        };
        let mut p = std::ptr::null_mut();
        // SAFETY: `p` is a valid out-parameter for the new allocation.
        self.check("ncclMemAlloc", unsafe { alloc(&mut p, bytes.max(1)) })?;
        // SAFETY: `p` is a fresh ncclMemAlloc allocation of at least
        // `bytes`, owned by nothing else, and ncclMemFree releases it.
        Ok(unsafe { DeviceBuffer::from_raw(p, bytes, free) })
    }

    /// ncclCommWindowRegister is there (`-R 2`).
    pub fn has_window_register(&self) -> bool {
        self.comm_window_register.is_some()
    }

    /// ncclCommWindowRegister, symmetric, of each buffer on its GPU's
    /// communicator (`-R 2`), in one group since registration is
    /// collective. Every registration is issued even after one fails (the
    /// peers wait for all of them); the first error is returned. `None`
    /// where NCCL gave no window.
    pub fn window_register_all(
        &self,
        bufs: &[(&Communicator, &DeviceBuffer)],
    ) -> Result<Vec<Option<Window>>, NcclError> {
        let register = self
            .comm_window_register
            .ok_or_else(|| missing("ncclCommWindowRegister"))?;
        // As in `comm_init_ranks`: the out-slots outlive the group.
        let mut wins: Vec<*mut c_void> = vec![std::ptr::null_mut(); bufs.len()];
        let slots = wins.as_mut_ptr();
        let mut result = Ok(());
        let group = Group::start(self)?;
        for (i, (comm, buf)) in bufs.iter().enumerate() {
            // SAFETY: `buf` is a live ncclMemAlloc allocation of
            // `buf.bytes` (callers deregister before freeing it);
            // `slots.add(i)` is inside `wins`, untouched until the group
            // has ended.
            let r = unsafe {
                register(
                    comm.0,
                    buf.at(0).as_raw(),
                    buf.bytes,
                    slots.add(i),
                    ffi::NCCL_WIN_COLL_SYMMETRIC,
                )
            };
            result = result.and(self.check("ncclCommWindowRegister", r));
        }
        let end = group.end();
        result.and(end)?;
        Ok(wins
            .into_iter()
            .map(|w| (!w.is_null()).then_some(Window(w)))
            .collect())
    }

    /// ncclCommWindowDeregister of a window made on `comm` (collective).
    pub fn window_deregister(&self, comm: &Communicator, win: Window) {
        if let Some(dereg) = self.comm_window_deregister {
            // SAFETY: a window from ncclCommWindowRegister on this
            // communicator, consumed here so it is deregistered once.
            unsafe { dereg(comm.0, win.0) };
        }
    }

    // The collectives and point-to-point calls (one per NCCL call, written
    // by `call::nccl_call!`), then alltoallv.

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

    // Device communicators for NCCL's device API (`-D`, NCCL >= 2.28).

    /// ncclDevCommCreate and ncclDevCommDestroy are there.
    pub fn has_dev_comm(&self) -> bool {
        self.dev_comm_create.is_some() && self.dev_comm_destroy.is_some()
    }

    /// ncclDevCommCreate on each communicator with `reqs`, in one group
    /// (creation is collective, as nccl-tests groups it). Every creation is
    /// issued even after one fails; the first error is returned.
    pub fn dev_comm_create_all(
        &self,
        comms: &[&Communicator],
        reqs: &DevCommRequirements,
    ) -> Result<Vec<DevComm>, NcclError> {
        let create = self
            .dev_comm_create
            .ok_or_else(|| missing("ncclDevCommCreate"))?;
        // As in `comm_init_ranks`: the out-slots outlive the group.
        let mut out = vec![DevComm::zeroed(); comms.len()];
        let slots = out.as_mut_ptr();
        let mut result = Ok(());
        let group = Group::start(self)?;
        for (i, comm) in comms.iter().enumerate() {
            // SAFETY: a live communicator; `reqs` is a repr(C)
            // ncclDevCommRequirements of NCCL 2.28 (empty lists, so NCCL
            // follows no pointer in it) read during the call;
            // `slots.add(i)` is inside `out`, a repr(C) ncclDevComm of
            // 2.28's layout, untouched until the group has ended.
            let r = unsafe { create(comm.0, reqs, slots.add(i)) };
            result = result.and(self.check("ncclDevCommCreate", r));
        }
        let end = group.end();
        result.and(end)?;
        Ok(out)
    }

    /// ncclDevCommDestroy of a device communicator made on `comm`.
    pub fn dev_comm_destroy(&self, comm: &Communicator, dev_comm: &DevComm) {
        if let Some(destroy) = self.dev_comm_destroy {
            // SAFETY: `dev_comm` came from ncclDevCommCreate on this live
            // communicator; NCCL reads it during the call.
            unsafe { destroy(comm.0, dev_comm) };
        }
    }
}

impl GroupApi for Nccl {
    fn group_start(&self) -> Result<(), NcclError> {
        // SAFETY: ncclGroupStart takes no arguments; groups are per thread.
        self.check("ncclGroupStart", unsafe { (self.group_start)() })
    }

    fn group_end(&self) -> Result<(), NcclError> {
        // SAFETY: ncclGroupEnd takes no arguments; the Group guard pairs it
        // with one ncclGroupStart.
        self.check("ncclGroupEnd", unsafe { (self.group_end)() })
    }
}
