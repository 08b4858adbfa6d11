//! The NCCL backend: one process drives `g` GPUs (one communicator rank
//! each), timed like nccl-tests (host wall clock around the whole loop,
//! ending when every stream has finished) with per-iteration CUDA events
//! for percentiles, and checked on the GPU by the verification kernels.

use crate::cuda::{self, Device, DeviceBuffer, Event, Graph, Stream};
use crate::ffi::{self, Comm, Nccl, RedOpId};
use crate::kernels::{self, KernelParams, Kernels};
use crate::loader::{self, FoundNccl};
use crate::NcclOptions;
use collbench_core::{Collective, DeviceInfo, ReduceOp};
use collbench_launch::Control;
use collbench_runner::{Backend, BackendError, BackendInfo, CaseSpec, Measurement, Timing};
use std::ffi::c_void;
use std::time::{Duration, Instant};

/// One local GPU: its context, stream, communicator and buffers.
///
/// Fields drop in declaration order: everything that lives in the device's
/// context goes before `dev`, which releases the context.
struct Gpu {
    kernels: Option<Kernels>,
    send: Option<DeviceBuffer>,
    recv: Option<DeviceBuffer>,
    stream: Stream,
    comm: Comm,
    /// Rank in this GPU's communicator.
    rank: usize,
    /// Rank among all GPUs of the job (differs from `rank` with
    /// NCCL_TESTS_SPLIT groups).
    global_rank: usize,
    /// NCCL_TESTS_SPLIT colour of this process.
    group: u64,
    /// ncclCommRegister handles of send and receive buffers (`-R 1`).
    reg: Vec<*mut c_void>,
    /// Symmetric windows over send and receive buffers (`-R 2`).
    win: Vec<*mut c_void>,
    dev: Device,
}

/// CUDA GPUs driven through NCCL.
pub struct NcclBackend {
    nccl: Nccl,
    found: FoundNccl,
    gpus: Vec<Gpu>,
    world_size: usize,
    host: String,
    opts: NcclOptions,
    /// Set after a timeout or async error: communicators were aborted.
    aborted: bool,
    /// A throwaway graph has been captured and replayed (`-G`).
    graphs_warmed: bool,
    /// Rotate buffer offsets between iterations (off with
    /// COLLBENCH_NO_ROTATE=1, for diagnosing cache effects).
    rotate: bool,
    /// Elements every buffer is misaligned by (`-u`).
    unalign: u64,
}

/// Pins the thread that launches collectives to one CPU, as mpirun binds
/// each rank by default: NCCL's host-side launch path is a few
/// microseconds, and migrations between cores show up at small sizes.
/// Done after communicator creation so NCCL's own threads keep the whole
/// mask. COLLBENCH_PIN=0 turns it off.
fn pin_driving_thread(local_rank: usize) {
    if std::env::var("COLLBENCH_PIN").as_deref() == Ok("0") {
        return;
    }
    // SAFETY: plain libc calls on a zeroed cpu_set_t for this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return;
        }
        let allowed: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect();
        if allowed.len() < 2 {
            return;
        }
        // Skip the first CPU (it takes most interrupts); spread local ranks.
        let cpu = allowed[(1 + 2 * local_rank) % allowed.len()];
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one);
        debug(&format!("pinned the launching thread to CPU {cpu}"));
    }
}

/// Undoes `-R 1` registration before buffers are freed.
fn deregister(nccl: &Nccl, gpu: &mut Gpu) {
    if let Some(dereg) = nccl.comm_deregister {
        for h in gpu.reg.drain(..) {
            unsafe { dereg(gpu.comm, h) };
        }
    }
}

/// Progress lines on stderr when COLLBENCH_DEBUG is set, to see where a
/// remote run stops.
fn debug(what: &str) {
    if std::env::var_os("COLLBENCH_DEBUG").is_some() {
        eprintln!("collbench debug: {what}");
    }
}

fn lib_err(e: String) -> BackendError {
    BackendError::Library(e)
}

impl NcclBackend {
    /// Loads NCCL, picks this process's GPUs and creates the communicators
    /// (exchanging the NCCL id over `control` when there are several
    /// processes).
    pub fn new(opts: &NcclOptions, control: &Control) -> Result<NcclBackend, BackendError> {
        let count = cuda::device_count().map_err(lib_err)?;
        if count == 0 {
            return Err(lib_err("no CUDA GPU is visible (check CUDA_VISIBLE_DEVICES and nvidia-smi); use --backend cpu".into()));
        }
        let (lib, found) =
            loader::open(opts.lib_path.as_deref()).map_err(|e| lib_err(e.to_string()))?;
        let nccl = Nccl::from_library(lib, found.version_code).map_err(lib_err)?;
        let procs = control.world_size();
        let g = opts
            .gpus_per_process
            .unwrap_or(if procs == 1 { count } else { 1 });
        // One process: GPUs 0..g. Under a launcher: this local rank's share
        // of the visible GPUs.
        let devices: Vec<usize> = if procs == 1 {
            (0..g).collect()
        } else {
            let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
            collbench_launch::gpu_for_local_rank(opts.local_rank, g, visible.as_deref())
        };
        if devices.len() != g || devices.iter().any(|&d| d >= count) {
            return Err(lib_err(format!(
                "asked for {g} GPU(s) per process{} but only {count} are visible: lower -g or check CUDA_VISIBLE_DEVICES",
                if procs > 1 { format!(" at local rank {}", opts.local_rank) } else { String::new() }
            )));
        }
        if opts.register > 2 {
            return Err(BackendError::Unsupported(format!(
                "-R {} is not a registration mode: use 0 (none), 1 (ncclCommRegister) or 2 (symmetric windows)",
                opts.register
            )));
        }
        // NCCL_TESTS_SPLIT(_MASK) splits the processes into groups that run
        // side by side, each with its own communicator (as nccl-tests does).
        let color = if procs > 1 {
            collbench_launch::split_color(control.rank(), |k| std::env::var(k).ok())
        } else {
            0
        };
        let colors: Vec<u64> = if procs > 1 {
            control
                .all_gather(color.to_le_bytes().to_vec())
                .map_err(|e| lib_err(e.to_string()))?
                .iter()
                .map(|b| u64::from_le_bytes(b.as_slice().try_into().unwrap_or([0; 8])))
                .collect()
        } else {
            vec![0]
        };
        let group: Vec<usize> = (0..procs).filter(|&p| colors[p] == color).collect();
        let index_in_group = group.iter().position(|&p| p == control.rank()).unwrap_or(0);
        let world_size = group.len() * g;
        let first_rank = index_in_group * g;
        let mut gpus = Vec::with_capacity(g);
        for (i, &ordinal) in devices.iter().enumerate() {
            let dev = Device::open(ordinal).map_err(lib_err)?;
            let stream = Stream::new(opts.stream_null).map_err(lib_err)?;
            gpus.push(Gpu {
                dev,
                stream,
                comm: std::ptr::null_mut(),
                rank: first_rank + i,
                global_rank: control.rank() * g + i,
                group: color,
                reg: Vec::new(),
                win: Vec::new(),
                send: None,
                recv: None,
                kernels: None,
            });
        }
        let mut comms = vec![std::ptr::null_mut(); g];
        if procs == 1 {
            let devs: Vec<i32> = gpus.iter().map(|x| x.dev.ordinal as i32).collect();
            nccl.check("ncclCommInitAll", unsafe {
                (nccl.comm_init_all)(comms.as_mut_ptr(), g as i32, devs.as_ptr())
            })
            .map_err(lib_err)?;
        } else {
            // The first process of each group makes its group's NCCL id.
            let mine = if index_in_group == 0 {
                let mut id = ffi::UniqueId { internal: [0; 128] };
                nccl.check("ncclGetUniqueId", unsafe { (nccl.get_unique_id)(&mut id) })
                    .map_err(lib_err)?;
                id.to_bytes()
            } else {
                Vec::new()
            };
            let ids = control
                .all_gather(mine)
                .map_err(|e| BackendError::Library(e.to_string()))?;
            let id = ffi::UniqueId::from_bytes(&ids[group[0]])
                .ok_or_else(|| lib_err("malformed NCCL id from the group's first rank".into()))?;
            unsafe { (nccl.group_start)() };
            for (i, gpu) in gpus.iter().enumerate() {
                gpu.dev.bind().map_err(lib_err)?;
                let r = unsafe {
                    (nccl.comm_init_rank)(&mut comms[i], world_size as i32, id, gpu.rank as i32)
                };
                nccl.check("ncclCommInitRank", r).map_err(lib_err)?;
            }
            nccl.check("ncclGroupEnd", unsafe { (nccl.group_end)() })
                .map_err(lib_err)?;
        }
        for (gpu, c) in gpus.iter_mut().zip(comms) {
            gpu.comm = c;
        }
        let mut warned = false;
        for gpu in &mut gpus {
            gpu.dev.bind().map_err(lib_err)?;
            match Kernels::load() {
                Ok(k) => gpu.kernels = Some(k),
                Err(e) if !warned => {
                    eprintln!("collbench: warning: GPU verification kernels unavailable ({e}); checking on the host instead, which is slower");
                    warned = true;
                }
                Err(_) => {}
            }
        }
        pin_driving_thread(opts.local_rank);
        Ok(NcclBackend {
            nccl,
            found,
            gpus,
            world_size,
            host: collbench_launch::world::system_hostname(),
            opts: opts.clone(),
            aborted: false,
            graphs_warmed: false,
            rotate: std::env::var_os("COLLBENCH_NO_ROTATE").is_none(),
            unalign: 0,
        })
    }

    /// Makes sure each GPU has send and receive buffers of `bytes`. All
    /// GPUs' buffers are the same size, so they are (re)allocated together:
    /// `-R 2` registers them collectively.
    fn ensure_buffers(&mut self, bytes: u64) -> Result<(), BackendError> {
        // Exactly what the largest case touches (nccl-tests allocates the
        // same); -u needs one element more at most.
        let bytes = bytes as usize + self.unalign as usize * 8;
        let have = self.gpus[0].recv.as_ref().map(|b| b.bytes).unwrap_or(0);
        if have >= bytes {
            return Ok(());
        }
        self.release_buffers();
        for i in 0..self.gpus.len() {
            self.gpus[i].dev.bind().map_err(lib_err)?;
            let send = self.alloc_buffer(i, bytes)?;
            let recv = self.alloc_buffer(i, bytes)?;
            (self.gpus[i].send, self.gpus[i].recv) = (Some(send), Some(recv));
        }
        match self.opts.register {
            1 => self.register_buffers(),
            2 => self.register_windows(),
            _ => Ok(()),
        }
    }

    /// One buffer on local GPU `i`: cuMemAlloc, or ncclMemAlloc under `-R 2`
    /// (window registration needs memory NCCL can map into other ranks).
    fn alloc_buffer(&self, i: usize, bytes: usize) -> Result<DeviceBuffer, BackendError> {
        let gpu = &self.gpus[i];
        let oom = |e: String| {
            let (free, total) = gpu.dev.mem_info();
            BackendError::OutOfMemory(format!(
                "{e} for {bytes} bytes on GPU {} ({free} of {total} bytes free): the largest size that fits is about {} bytes; lower -e",
                gpu.dev.ordinal,
                free / 2
            ))
        };
        if self.opts.register != 2 {
            return DeviceBuffer::alloc(bytes).map_err(oom);
        }
        let (Some(alloc), Some(free)) = (self.nccl.mem_alloc, self.nccl.mem_free) else {
            return Err(BackendError::Unsupported(
                "-R 2 needs NCCL >= 2.27 (ncclMemAlloc, ncclCommWindowRegister): use -R 1".into(),
            ));
        };
        let mut p = std::ptr::null_mut();
        self.nccl
            .check("ncclMemAlloc", unsafe { alloc(&mut p, bytes.max(1)) })
            .map_err(oom)?;
        // SAFETY: p is a fresh ncclMemAlloc allocation of `bytes`.
        Ok(unsafe { DeviceBuffer::from_raw(p, bytes, free) })
    }

    /// `-R 1`: ncclCommRegister on every buffer (local, not collective).
    fn register_buffers(&mut self) -> Result<(), BackendError> {
        let register = self.nccl.comm_register.ok_or_else(|| {
            BackendError::Unsupported("-R 1 needs NCCL >= 2.19 (ncclCommRegister)".into())
        })?;
        for gpu in &mut self.gpus {
            gpu.dev.bind().map_err(lib_err)?;
            for buf in [gpu.send.as_ref(), gpu.recv.as_ref()].into_iter().flatten() {
                let mut handle = std::ptr::null_mut();
                let r = unsafe { register(gpu.comm, buf.as_ptr(0), buf.bytes, &mut handle) };
                self.nccl.check("ncclCommRegister", r).map_err(lib_err)?;
                gpu.reg.push(handle);
            }
        }
        Ok(())
    }

    /// `-R 2`: symmetric windows over every buffer. Registration is
    /// collective over each communicator, so the GPUs of this process
    /// register inside one group.
    fn register_windows(&mut self) -> Result<(), BackendError> {
        let register = self.nccl.comm_window_register.ok_or_else(|| {
            BackendError::Unsupported(
                "-R 2 needs NCCL >= 2.27 (ncclCommWindowRegister): use -R 1".into(),
            )
        })?;
        let n = &self.nccl;
        let mut wins = vec![[std::ptr::null_mut(); 2]; self.gpus.len()];
        unsafe { (n.group_start)() };
        let mut result = Ok(());
        for (gpu, w) in self.gpus.iter().zip(&mut wins) {
            let bufs = [gpu.send.as_ref(), gpu.recv.as_ref()];
            for (buf, slot) in bufs.into_iter().flatten().zip(w.iter_mut()) {
                let r = unsafe {
                    register(
                        gpu.comm,
                        buf.as_ptr(0),
                        buf.bytes,
                        slot,
                        ffi::NCCL_WIN_COLL_SYMMETRIC,
                    )
                };
                result = result.and(n.check("ncclCommWindowRegister", r));
            }
        }
        let end = n.check("ncclGroupEnd", unsafe { (n.group_end)() });
        result.and(end).map_err(lib_err)?;
        for (gpu, w) in self.gpus.iter_mut().zip(wins) {
            gpu.win.extend(w.into_iter().filter(|p| !p.is_null()));
        }
        Ok(())
    }

    /// Undoes `-R 1`/`-R 2` registration and frees every buffer.
    fn release_buffers(&mut self) {
        let n = &self.nccl;
        if let Some(dereg) = n.comm_window_deregister {
            if self.gpus.iter().any(|g| !g.win.is_empty()) {
                unsafe { (n.group_start)() };
                for gpu in &mut self.gpus {
                    for w in gpu.win.drain(..) {
                        unsafe { dereg(gpu.comm, w) };
                    }
                }
                unsafe { (n.group_end)() };
            }
        }
        for gpu in &mut self.gpus {
            let _ = gpu.dev.bind();
            deregister(n, gpu);
            gpu.send = None;
            gpu.recv = None;
        }
    }

    /// Buffer pointers of local GPU `i` for the operation at `iter`
    /// (offsets rotate through the allocation like nccl-tests').
    fn ptrs(
        &self,
        case: &CaseSpec,
        i: usize,
        iter: u64,
        max_bytes: u64,
    ) -> (*mut c_void, *mut c_void) {
        let gpu = &self.gpus[i];
        let elt = case.dtype.size_bytes() as u64;
        let c = &case.counts;
        let t = c.send_count.max(c.recv_count) * elt;
        let steps = if t > 0 && self.rotate {
            (max_bytes / t).max(1)
        } else {
            1
        };
        let shift = (t * (iter % steps) + self.unalign * elt) as usize;
        let recv = gpu.recv.as_ref().expect("buffers allocated").as_ptr(shift);
        let r = gpu.rank as u64;
        if case.in_place {
            let send = (recv as u64 + c.send_inplace_offset * r * elt) as *mut c_void;
            let recv = (recv as u64 + c.recv_inplace_offset * r * elt) as *mut c_void;
            (send, recv)
        } else {
            (
                gpu.send.as_ref().expect("buffers allocated").as_ptr(shift),
                recv,
            )
        }
    }

    /// Creates the per-GPU reduction operators (premulsum needs one per
    /// communicator); built-ins need nothing.
    fn make_ops(&self, case: &CaseSpec) -> Result<Vec<RedOpId>, BackendError> {
        let mut ops = Vec::new();
        for gpu in &self.gpus {
            if case.redop == ReduceOp::MulSum
                && case.collective.spec().redop == collbench_core::collective::RedopUse::Reduces
            {
                let create = self.nccl.red_op_create_pre_mul_sum.ok_or_else(|| {
                    BackendError::Unsupported(
                        "mulsum needs NCCL >= 2.11 (ncclRedOpCreatePreMulSum)".into(),
                    )
                })?;
                let pat = kernels::pattern(case, 0);
                let mut scalar = kernels::scalar_bytes(case.dtype, pat.scalar(gpu.rank));
                let mut op: RedOpId = 0;
                let r = unsafe {
                    create(
                        &mut op,
                        scalar.as_mut_ptr() as *mut c_void,
                        ffi::dtype_id(case.dtype),
                        ffi::SCALAR_HOST_IMMEDIATE,
                        gpu.comm,
                    )
                };
                self.nccl
                    .check("ncclRedOpCreatePreMulSum", r)
                    .map_err(lib_err)?;
                ops.push(op);
            } else {
                ops.push(ffi::redop_id(case.redop));
            }
        }
        Ok(ops)
    }

    fn free_ops(&self, case: &CaseSpec, ops: &[RedOpId]) {
        if case.redop != ReduceOp::MulSum {
            return;
        }
        if let Some(destroy) = self.nccl.red_op_destroy {
            for (gpu, &op) in self.gpus.iter().zip(ops) {
                if op >= 5 {
                    unsafe { destroy(op, gpu.comm) };
                }
            }
        }
    }

    /// Enqueues one operation of `case` on every local GPU.
    fn launch(
        &self,
        case: &CaseSpec,
        iter: u64,
        max_bytes: u64,
        ops: &[RedOpId],
    ) -> Result<(), BackendError> {
        let n = &self.nccl;
        let grouped = self.gpus.len() > 1;
        if grouped {
            unsafe { (n.group_start)() };
        }
        for (i, &op) in ops.iter().enumerate().take(self.gpus.len()) {
            let (send, recv) = self.ptrs(case, i, iter, max_bytes);
            self.issue(case, i, send, recv, op)?;
        }
        if grouped {
            n.check("ncclGroupEnd", unsafe { (n.group_end)() })
                .map_err(lib_err)?;
        }
        Ok(())
    }

    /// The library calls of one collective on local GPU `i`.
    fn issue(
        &self,
        case: &CaseSpec,
        i: usize,
        send: *mut c_void,
        recv: *mut c_void,
        op: RedOpId,
    ) -> Result<(), BackendError> {
        let n = &self.nccl;
        let gpu = &self.gpus[i];
        let (comm, s) = (gpu.comm, gpu.stream.raw());
        let dt = ffi::dtype_id(case.dtype);
        let elt = case.dtype.size_bytes();
        let c = &case.counts;
        let count = c.param_count as usize;
        let world = case.world_size;
        let rank = gpu.rank;
        let root = case.root as i32;
        let at = |p: *mut c_void, elems: usize| (p as usize + elems * elt) as *mut c_void;
        let chk = |what: &str, r| n.check(what, r).map_err(lib_err);
        // Point-to-point pieces of the collectives NCCL lacks (before 2.28).
        let send_to = |buf: *mut c_void, peer: usize| {
            chk("ncclSend", unsafe {
                (n.send)(buf, count, dt, peer as i32, comm, s)
            })
        };
        let recv_from = |buf: *mut c_void, peer: usize| {
            chk("ncclRecv", unsafe {
                (n.recv)(buf, count, dt, peer as i32, comm, s)
            })
        };
        let grouped = |body: &mut dyn FnMut(()) -> Result<(), BackendError>| {
            unsafe { (n.group_start)() };
            body(())?;
            chk("ncclGroupEnd", unsafe { (n.group_end)() })
        };
        unsafe {
            match case.collective {
                Collective::AllReduce => chk(
                    "ncclAllReduce",
                    (n.all_reduce)(send, recv, count, dt, op, comm, s),
                ),
                Collective::AllGather => chk(
                    "ncclAllGather",
                    (n.all_gather)(send, recv, count, dt, comm, s),
                ),
                Collective::ReduceScatter => chk(
                    "ncclReduceScatter",
                    (n.reduce_scatter)(send, recv, count, dt, op, comm, s),
                ),
                Collective::Broadcast => chk(
                    "ncclBroadcast",
                    (n.broadcast)(send, recv, count, dt, root, comm, s),
                ),
                Collective::Reduce => chk(
                    "ncclReduce",
                    (n.reduce)(send, recv, count, dt, op, root, comm, s),
                ),
                Collective::AllToAll => match n.alltoall {
                    Some(f) => chk("ncclAlltoAll", f(send, recv, count, dt, comm, s)),
                    None => grouped(&mut |_| {
                        for peer in 0..world {
                            send_to(at(send, peer * count), peer)?;
                            recv_from(at(recv, peer * count), peer)?;
                        }
                        Ok(())
                    }),
                },
                Collective::SendRecv => grouped(&mut |_| {
                    send_to(send, (rank + 1) % world)?;
                    recv_from(recv, (rank + world - 1) % world)
                }),
                Collective::Gather => match n.gather {
                    Some(f) => chk("ncclGather", f(send, recv, count, dt, root, comm, s)),
                    None => grouped(&mut |_| {
                        if rank == case.root {
                            for peer in 0..world {
                                recv_from(at(recv, peer * count), peer)?;
                            }
                        }
                        send_to(send, case.root)
                    }),
                },
                Collective::Scatter => match n.scatter {
                    Some(f) => chk("ncclScatter", f(send, recv, count, dt, root, comm, s)),
                    None => grouped(&mut |_| {
                        if rank == case.root {
                            for peer in 0..world {
                                send_to(at(send, peer * count), peer)?;
                            }
                        }
                        recv_from(recv, case.root)
                    }),
                },
                Collective::HyperCube => {
                    // Own chunk first, then log2(n) pairwise exchanges of
                    // everything gathered so far.
                    let own = at(recv, rank * count);
                    if own != send && count > 0 {
                        gpu.dev.bind().map_err(lib_err)?;
                        cuda::check(
                            "cuMemcpyDtoDAsync",
                            cudarc::driver::sys::cuMemcpyDtoDAsync_v2(
                                own as u64,
                                send as u64,
                                count * elt,
                                s as _,
                            ),
                        )
                        .map_err(lib_err)?;
                    }
                    let mut block = 1;
                    while block < world {
                        let peer = rank ^ block;
                        let mine = rank & !(block - 1);
                        let theirs = peer & !(block - 1);
                        (n.group_start)();
                        chk(
                            "ncclSend",
                            (n.send)(
                                at(recv, mine * count),
                                block * count,
                                dt,
                                peer as i32,
                                comm,
                                s,
                            ),
                        )?;
                        chk(
                            "ncclRecv",
                            (n.recv)(
                                at(recv, theirs * count),
                                block * count,
                                dt,
                                peer as i32,
                                comm,
                                s,
                            ),
                        )?;
                        chk("ncclGroupEnd", (n.group_end)())?;
                        block <<= 1;
                    }
                    Ok(())
                }
            }
        }
    }

    /// Waits for every stream, polling NCCL's async errors and the `-T`
    /// timeout so a broken peer aborts the communicators instead of hanging.
    fn wait_all(&mut self) -> Result<(), BackendError> {
        let start = Instant::now();
        let timeout = (self.opts.timeout_s > 0).then(|| Duration::from_secs(self.opts.timeout_s));
        let mut polls = 0u64;
        for i in 0..self.gpus.len() {
            if self.gpus.len() > 1 {
                self.gpus[i].dev.bind().map_err(lib_err)?;
            }
            loop {
                if self.gpus[i].stream.query().map_err(lib_err)? {
                    break;
                }
                polls += 1;
                if polls.is_multiple_of(1024) {
                    self.check_async()?;
                    if let Some(t) = timeout {
                        if start.elapsed() > t {
                            self.abort();
                            return Err(BackendError::Timeout(format!(
                                "a collective did not finish within -T {} s: communicators aborted (a peer may be stuck or dead)",
                                t.as_secs()
                            )));
                        }
                    }
                }
                std::hint::spin_loop();
            }
        }
        Ok(())
    }

    fn check_async(&mut self) -> Result<(), BackendError> {
        for gpu in &self.gpus {
            let mut r = 0;
            unsafe { (self.nccl.comm_get_async_error)(gpu.comm, &mut r) };
            if r != ffi::NCCL_SUCCESS && r != ffi::NCCL_IN_PROGRESS {
                let msg = self.nccl.check("NCCL communicator", r).unwrap_err();
                self.abort();
                return Err(lib_err(format!("{msg}: communicators aborted")));
            }
        }
        Ok(())
    }

    fn abort(&mut self) {
        if self.aborted {
            return;
        }
        for gpu in &self.gpus {
            let _ = gpu.dev.bind();
            unsafe { (self.nccl.comm_abort)(gpu.comm) };
        }
        self.aborted = true;
    }

    fn ensure_usable(&self) -> Result<(), BackendError> {
        if self.aborted {
            return Err(lib_err(
                "the NCCL communicators were aborted after an earlier error".into(),
            ));
        }
        Ok(())
    }
}

impl Drop for NcclBackend {
    fn drop(&mut self) {
        if self.aborted {
            return;
        }
        for gpu in &self.gpus {
            let _ = gpu.dev.bind();
            let _ = gpu.stream.synchronize();
        }
        self.release_buffers();
        for gpu in &self.gpus {
            let _ = gpu.dev.bind();
            unsafe { (self.nccl.comm_destroy)(gpu.comm) };
        }
    }
}

impl Backend for NcclBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: "nccl".into(),
            library: Some(format!("NCCL {}", self.found.version_string())),
            library_path: Some(self.found.path.display().to_string()),
            library_version_code: Some(self.found.version_code as u32),
            devices: self
                .gpus
                .iter()
                .map(|g| DeviceInfo {
                    rank: g.global_rank as u64,
                    group: g.group,
                    pid: std::process::id() as u64,
                    host: self.host.clone(),
                    device: g.dev.ordinal as u64,
                    bus_id: Some(g.dev.pci_bus_id()),
                    name: g.dev.name(),
                })
                .collect(),
        }
    }

    fn local_ranks(&self) -> usize {
        self.gpus.len()
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn supports(&self, case: &CaseSpec) -> Result<(), BackendError> {
        if self.opts.register == 2
            && !matches!(
                case.collective,
                Collective::AllReduce
                    | Collective::AllGather
                    | Collective::ReduceScatter
                    | Collective::AllToAll
            )
        {
            // Verified on H200 x2 / NCCL 2.28.3 with one and two processes
            // for these four; broadcast with two GPUs in one process never
            // finished at 2 MiB.
            return Err(BackendError::Unsupported(
                "-R 2 runs all_reduce, all_gather, reduce_scatter and alltoall only (broadcast hung at 2 MiB with symmetric windows on NCCL 2.28.3): use -R 1 for this collective".into(),
            ));
        }
        if case.dtype.is_f8() {
            if self.found.version_code < 22400 {
                return Err(BackendError::Unsupported(format!(
                    "{} needs NCCL >= 2.24 (found {})",
                    case.dtype,
                    self.found.version_string()
                )));
            }
            if let Some(g) = self.gpus.iter().find(|g| g.dev.compute_capability().0 < 9) {
                return Err(BackendError::Unsupported(format!(
                    "{} needs compute capability >= 9.0 (GPU {} is {:?})",
                    case.dtype,
                    g.dev.ordinal,
                    g.dev.compute_capability()
                )));
            }
        }
        if case.redop == ReduceOp::MulSum
            && case.collective.spec().redop == collbench_core::collective::RedopUse::Reduces
            && self.nccl.red_op_create_pre_mul_sum.is_none()
        {
            return Err(BackendError::Unsupported(
                "mulsum needs NCCL >= 2.11".into(),
            ));
        }
        Ok(())
    }

    fn set_unalign(&mut self, elements: u64) -> Result<(), BackendError> {
        self.unalign = elements;
        Ok(())
    }

    fn time(&mut self, case: &CaseSpec, timing: &Timing) -> Result<Measurement, BackendError> {
        debug(&format!(
            "time {} {} {} in_place={}",
            case.collective,
            case.dtype,
            case.size_bytes(),
            case.in_place
        ));
        self.ensure_usable()?;
        self.ensure_buffers(timing.max_bytes.max(case.size_bytes()))?;
        let ops = self.make_ops(case)?;
        let result = self.time_inner(case, timing, &ops);
        self.free_ops(case, &ops);
        result
    }

    fn check(&mut self, case: &CaseSpec, seed: u64, corrupt: bool) -> Result<u64, BackendError> {
        debug("check");
        self.ensure_usable()?;
        self.ensure_buffers(case.size_bytes())?;
        let ops = self.make_ops(case)?;
        let result = self.check_inner(case, seed, corrupt, &ops);
        self.free_ops(case, &ops);
        result
    }
}

impl NcclBackend {
    fn time_inner(
        &mut self,
        case: &CaseSpec,
        timing: &Timing,
        ops: &[RedOpId],
    ) -> Result<Measurement, BackendError> {
        let agg = timing.agg_iters.max(1) as u64;
        let iters = timing.iters.max(1) as u64;
        let max = timing.max_bytes.max(case.size_bytes());
        for _ in 0..timing.warmup_iters {
            self.launch(case, 0, max, ops)?;
        }
        self.wait_all()?;
        if timing.graph > 0 {
            return self.time_graph(case, timing, ops);
        }
        // A timing event between two collectives on a stream costs a few
        // microseconds per iteration on the GPU (measured on H200: +2-4 us
        // per iteration from 4 MiB to 128 MiB against a bare loop), and host
        // time at small sizes. So the timed loop runs bare, as nccl-tests',
        // and a second pass of the same length takes the per-iteration
        // times; only from 1 GiB, where an iteration takes milliseconds and
        // the gap is below 0.1%, are the events recorded in the timed loop.
        let inline_events = match std::env::var("COLLBENCH_ITER_EVENTS").as_deref() {
            Ok("inline") => true,
            Ok("separate") => false,
            _ => case.size_bytes() >= 1 << 30,
        };
        let (total, cpu, mut iter_times_us) =
            self.timed_loop(case, iters, agg, max, ops, timing.blocking, inline_events)?;
        if !inline_events {
            iter_times_us = self
                .timed_loop(case, iters, agg, max, ops, timing.blocking, true)?
                .2;
        }
        let per = (iters * agg) as f64;
        let n = self.gpus.len();
        Ok(Measurement {
            rank_time_s: vec![total / per; n],
            rank_cputime_s: vec![cpu / per; n],
            iter_times_us,
            iter_stats: None,
        })
    }

    /// One timed iteration: `agg` collectives (`-m`), in one group when
    /// there are several.
    fn launch_iteration(
        &self,
        case: &CaseSpec,
        it: u64,
        agg: u64,
        max: u64,
        ops: &[RedOpId],
    ) -> Result<(), BackendError> {
        let n = &self.nccl;
        if agg > 1 {
            unsafe { (n.group_start)() };
        }
        for a in 0..agg {
            self.launch(case, it * agg + a, max, ops)?;
        }
        if agg > 1 {
            n.check("ncclGroupEnd", unsafe { (n.group_end)() })
                .map_err(lib_err)?;
        }
        Ok(())
    }

    /// `-G`: captures the timed iterations in one CUDA graph per GPU and
    /// replays it `timing.graph` times; time = wall clock of the replays /
    /// (iterations x aggregation x replays), as nccl-tests.
    fn time_graph(
        &mut self,
        case: &CaseSpec,
        timing: &Timing,
        ops: &[RedOpId],
    ) -> Result<Measurement, BackendError> {
        let agg = timing.agg_iters.max(1) as u64;
        let iters = timing.iters.max(1) as u64;
        let max = timing.max_bytes.max(case.size_bytes());
        if !self.graphs_warmed {
            // The first graph of a process pays one-time costs when it is
            // captured and first replayed (measured: 0.2-0.9 us per
            // iteration more at the first size, in the C reference too);
            // a throwaway one-iteration graph takes them before any timing.
            let graphs = self.capture(case, 1, agg, max, ops)?;
            self.replay(&graphs, 1)?;
            self.wait_all()?;
            self.graphs_warmed = true;
        }
        let graphs = self.capture(case, iters, agg, max, ops)?;
        // Capture and instantiation take each process its own time; one
        // plain collective realigns the ranks before the timer starts
        // (nccl-tests puts a barrier there), so a late peer's setup is not
        // charged to the replays (measured: 3-5% at small sizes with two
        // processes).
        self.launch(case, 0, max, ops)?;
        self.wait_all()?;
        debug("graph: launch");
        let start = Instant::now();
        self.replay(&graphs, timing.graph)?;
        let cpu = start.elapsed().as_secs_f64();
        self.wait_all()?;
        let total = start.elapsed().as_secs_f64();
        let per = (iters * agg * timing.graph as u64) as f64;
        let n = self.gpus.len();
        Ok(Measurement {
            rank_time_s: vec![total / per; n],
            rank_cputime_s: vec![cpu / per; n],
            iter_times_us: Vec::new(),
            iter_stats: None,
        })
    }

    /// Captures `iters` iterations (each `agg` collectives in one group) on
    /// every GPU's stream; returns the instantiated, uploaded graphs.
    fn capture(
        &mut self,
        case: &CaseSpec,
        iters: u64,
        agg: u64,
        max: u64,
        ops: &[RedOpId],
    ) -> Result<Vec<Graph>, BackendError> {
        debug("graph: capture");
        for g in &self.gpus {
            g.dev.bind().map_err(lib_err)?;
            g.stream.begin_capture().map_err(lib_err)?;
        }
        for it in 0..iters {
            self.launch_iteration(case, it, agg, max, ops)?;
        }
        // Every capture ends before any graph is instantiated: a group over
        // several GPUs of one thread ties their captures together, and
        // instantiating the first while the second was still capturing
        // never returned (NCCL 2.28, H200).
        let mut graphs = Vec::new();
        for (i, g) in self.gpus.iter().enumerate() {
            debug(&format!("graph: end capture on GPU {i}"));
            g.dev.bind().map_err(lib_err)?;
            graphs.push(g.stream.end_capture().map_err(lib_err)?);
        }
        debug("graph: instantiate");
        for (g, graph) in self.gpus.iter().zip(&mut graphs) {
            g.dev.bind().map_err(lib_err)?;
            graph.instantiate().map_err(lib_err)?;
            graph.upload(&g.stream).map_err(lib_err)?;
        }
        Ok(graphs)
    }

    /// Launches every GPU's graph `times` times.
    fn replay(&self, graphs: &[Graph], times: u32) -> Result<(), BackendError> {
        for _ in 0..times {
            for (g, graph) in self.gpus.iter().zip(graphs) {
                if self.gpus.len() > 1 {
                    g.dev.bind().map_err(lib_err)?;
                }
                graph.launch(&g.stream).map_err(lib_err)?;
            }
        }
        Ok(())
    }

    /// The timed loop: returns (wall seconds to completion, seconds to
    /// issue, per-iteration microseconds when `events`).
    #[allow(clippy::too_many_arguments)]
    fn timed_loop(
        &mut self,
        case: &CaseSpec,
        iters: u64,
        agg: u64,
        max: u64,
        ops: &[RedOpId],
        blocking: u32,
        events: bool,
    ) -> Result<(f64, f64, Vec<f64>), BackendError> {
        // Events belong to GPU 0's context, like the stream they time.
        self.gpus[0].dev.bind().map_err(lib_err)?;
        let evs: Vec<Event> = if events {
            (0..=iters)
                .map(|_| Event::new())
                .collect::<Result<_, _>>()
                .map_err(lib_err)?
        } else {
            Vec::new()
        };
        let multi = self.gpus.len() > 1;
        let start = Instant::now();
        if events {
            evs[0].record(&self.gpus[0].stream).map_err(lib_err)?;
        }
        for it in 0..iters {
            self.launch_iteration(case, it, agg, max, ops)?;
            if events {
                if multi {
                    self.gpus[0].dev.bind().map_err(lib_err)?;
                }
                evs[it as usize + 1]
                    .record(&self.gpus[0].stream)
                    .map_err(lib_err)?;
            }
            if blocking > 0 {
                self.wait_all()?;
            }
        }
        let cpu = start.elapsed().as_secs_f64();
        self.wait_all()?;
        let total = start.elapsed().as_secs_f64();
        let iter_us = evs
            .windows(2)
            .map(|w| {
                w[0].elapsed_ms(&w[1])
                    .map(|ms| ms as f64 * 1000.0 / agg as f64)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(lib_err)?;
        Ok((total, cpu, iter_us))
    }

    fn check_inner(
        &mut self,
        case: &CaseSpec,
        seed: u64,
        corrupt: bool,
        ops: &[RedOpId],
    ) -> Result<u64, BackendError> {
        let elt = case.dtype.size_bytes();
        let c = case.counts;
        let max = case.size_bytes();
        for i in 0..self.gpus.len() {
            let (send, recv) = self.ptrs(case, i, 0, max);
            let gpu = &self.gpus[i];
            gpu.dev.bind().map_err(lib_err)?;
            // Poison everything the result can land in, then write inputs.
            let (base, len) = if case.in_place {
                (
                    (send as u64 - c.send_inplace_offset * gpu.rank as u64 * elt as u64)
                        as *mut c_void,
                    c.send_count.max(c.recv_count),
                )
            } else {
                (recv, c.recv_count)
            };
            cuda::memset_async(base, 0xff, len as usize * elt, &gpu.stream).map_err(lib_err)?;
            match &gpu.kernels {
                Some(k) => k
                    .fill(
                        send,
                        &KernelParams::new(case, gpu.rank, seed),
                        case.dtype,
                        &gpu.stream,
                    )
                    .map_err(lib_err)?,
                None => {
                    gpu.stream.synchronize().map_err(lib_err)?;
                    cuda::copy_to_device(send, &kernels::host_input(case, gpu.rank, seed))
                        .map_err(lib_err)?;
                }
            }
        }
        self.wait_all()?;
        self.launch(case, 0, max, ops)?;
        self.wait_all()?;
        let mut wrong = 0;
        for i in 0..self.gpus.len() {
            let (_, recv) = self.ptrs(case, i, 0, max);
            let gpu = &self.gpus[i];
            gpu.dev.bind().map_err(lib_err)?;
            if corrupt && gpu.rank == case.root && c.recv_count > 0 {
                cuda::memset_async(recv, 0xff, elt, &gpu.stream).map_err(lib_err)?;
            }
            wrong += match &gpu.kernels {
                Some(k) => k
                    .check(
                        recv,
                        &KernelParams::new(case, gpu.rank, seed),
                        case.dtype,
                        &gpu.stream,
                    )
                    .map_err(lib_err)?,
                None => {
                    gpu.stream.synchronize().map_err(lib_err)?;
                    let mut host = vec![0u8; c.recv_count as usize * elt];
                    cuda::copy_to_host(&mut host, recv).map_err(lib_err)?;
                    kernels::host_check(case, gpu.rank, seed, &host)
                }
            };
        }
        Ok(wrong)
    }
}
