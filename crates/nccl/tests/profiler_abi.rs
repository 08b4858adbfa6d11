//! The profiler plugin end to end, without a GPU: the library build.rs
//! compiled is installed as collbench installs it, then driven exactly as
//! NCCL drives it (dlopen of NCCL_PROFILER_PLUGIN, `ncclProfiler_v5` and
//! older tables, `init` per communicator with one shared activation mask,
//! `startEvent`/`stopEvent` with NCCL's descriptor layouts, gated by the
//! mask as NCCL gates them), while collbench switches recording and drains.
//!
//! One test function: the plugin and the environment variable are
//! process-wide.

use collbench_nccl::explain::{ExpectedRank, Explainer};
use std::ffi::{c_char, c_int, c_void, CString};
use std::ptr::null_mut;

const PROFILE_COLL: u64 = 1 << 1;
const PROFILE_P2P: u64 = 1 << 2;
const PROFILE_GROUP: u64 = 1 << 0;

// NCCL's v5 descriptor (ext-profiler/example/nccl/profiler_v5.h), the
// members up to the largest used here.
#[repr(C)]
#[derive(Clone, Copy)]
struct CollV5 {
    seq_number: u64,
    func: *const c_char,
    send_buff: *const c_void,
    recv_buff: *mut c_void,
    count: usize,
    root: c_int,
    datatype: *const c_char,
    n_channels: u8,
    n_warps: u8,
    algo: *const c_char,
    proto: *const c_char,
    parent_group: *mut c_void,
}
#[repr(C)]
#[derive(Clone, Copy)]
struct P2pV5 {
    func: *const c_char,
    buff: *mut c_void,
    datatype: *const c_char,
    count: usize,
    peer: c_int,
    n_channels: u8,
    parent_group: *mut c_void,
}
#[repr(C)]
union UnionV5 {
    coll: CollV5,
    p2p: P2pV5,
    // proxyOp etc. are smaller than coll.
}
#[repr(C)]
struct DescrV5 {
    kind: u64,
    parent_obj: *mut c_void,
    rank: c_int,
    u: UnionV5,
}

// NCCL's v3 descriptor: one-byte type, name and hash first.
#[repr(C)]
#[derive(Clone, Copy)]
struct CollV3 {
    name: *const c_char,
    comm_hash: u64,
    seq_number: u64,
    func: *const c_char,
    send_buff: *const c_void,
    recv_buff: *mut c_void,
    count: usize,
    root: c_int,
    datatype: *const c_char,
    n_max_channels: u8,
    n_warps: u8,
    algo: *const c_char,
    proto: *const c_char,
}
#[repr(C)]
struct DescrV3 {
    kind: u8,
    parent_obj: *mut c_void,
    rank: c_int,
    coll: CollV3,
}

type LogFn = Option<unsafe extern "C" fn()>;

#[repr(C)]
struct ProfilerV5 {
    name: *const c_char,
    init: unsafe extern "C" fn(
        *mut *mut c_void,
        u64,
        *mut c_int,
        *const c_char,
        c_int,
        c_int,
        c_int,
        LogFn,
    ) -> c_int,
    start_event: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut DescrV5) -> c_int,
    stop_event: unsafe extern "C" fn(*mut c_void) -> c_int,
    record_event_state: unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> c_int,
    finalize: unsafe extern "C" fn(*mut c_void) -> c_int,
}
#[repr(C)]
struct ProfilerV3 {
    name: *const c_char,
    init: unsafe extern "C" fn(*mut *mut c_void, *mut c_int) -> c_int,
    start_event: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut DescrV3) -> c_int,
    stop_event: unsafe extern "C" fn(*mut c_void) -> c_int,
    record_event_state: unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> c_int,
    finalize: unsafe extern "C" fn(*mut c_void) -> c_int,
}

/// NCCL's strings are static; these live for the whole test.
fn s(text: &str) -> *const c_char {
    CString::new(text).unwrap().into_raw()
}

fn coll(rank: c_int, func: &str, algo: &str, proto: &str, channels: u8) -> DescrV5 {
    DescrV5 {
        kind: PROFILE_COLL,
        parent_obj: null_mut(),
        rank,
        u: UnionV5 {
            coll: CollV5 {
                seq_number: 3,
                func: s(func),
                send_buff: null_mut(),
                recv_buff: null_mut(),
                count: 256,
                root: 0,
                datatype: s("ncclFloat32"),
                n_channels: channels,
                n_warps: 16,
                algo: s(algo),
                proto: s(proto),
                parent_group: null_mut(),
            },
        },
    }
}

fn p2p(rank: c_int, func: &str, peer: c_int, channels: u8) -> DescrV5 {
    DescrV5 {
        kind: PROFILE_P2P,
        parent_obj: null_mut(),
        rank,
        u: UnionV5 {
            p2p: P2pV5 {
                func: s(func),
                buff: null_mut(),
                datatype: s("ncclFloat32"),
                count: 64,
                peer,
                n_channels: channels,
                parent_group: null_mut(),
            },
        },
    }
}

/// NCCL's side: the tables it found in the plugin, called as NCCL calls
/// them. Each wrapper is one NCCL call with arguments of the documented
/// types.
struct Nccl {
    v5: &'static ProfilerV5,
    v3: &'static ProfilerV3,
}

impl Nccl {
    /// dlopen(NCCL_PROFILER_PLUGIN) and the symbol lookups; the library
    /// stays loaded for the rest of the process, as under NCCL.
    fn open(path: &std::path::Path) -> Nccl {
        // SAFETY: the library collbench_profiler.c builds, whose tables
        // have exactly these layouts (see the C file's static asserts).
        unsafe {
            let lib = Box::leak(Box::new(libloading::Library::new(path).unwrap()));
            for sym in [&b"ncclProfiler_v4\0"[..], &b"ncclProfiler_v2\0"[..]] {
                assert!(lib.get::<*const c_void>(sym).is_ok());
            }
            Nccl {
                v5: &**lib.get::<*const ProfilerV5>(b"ncclProfiler_v5\0").unwrap(),
                v3: &**lib.get::<*const ProfilerV3>(b"ncclProfiler_v3\0").unwrap(),
            }
        }
    }

    fn name(&self) -> String {
        // SAFETY: `name` is a static C string of the plugin.
        unsafe { std::ffi::CStr::from_ptr(self.v5.name) }
            .to_string_lossy()
            .into_owned()
    }

    /// `init` for a communicator of `nranks` where this is `rank`.
    fn init5(&self, mask: *mut c_int, nranks: c_int, rank: c_int) -> (c_int, *mut c_void) {
        let mut ctx = null_mut();
        // SAFETY: valid out-pointer and mask (or a null mask, on purpose).
        let r = unsafe { (self.v5.init)(&mut ctx, 42, mask, s("comm"), 1, nranks, rank, None) };
        (r, ctx)
    }

    fn init3(&self, mask: &mut c_int) -> *mut c_void {
        let mut ctx = null_mut();
        // SAFETY: valid out-pointer and mask.
        assert_eq!(unsafe { (self.v3.init)(&mut ctx, mask) }, 0);
        ctx
    }

    /// `startEvent` + `stopEvent`, regardless of the mask; returns the
    /// handle the plugin gave.
    fn start_stop5(&self, ctx: *mut c_void, mut d: DescrV5) -> *mut c_void {
        let mut handle: *mut c_void = std::ptr::dangling_mut();
        // SAFETY: a context from init and a descriptor of v5's layout whose
        // strings live for the whole test.
        unsafe {
            assert_eq!((self.v5.start_event)(ctx, &mut handle, &mut d), 0);
            assert_eq!((self.v5.stop_event)(handle), 0);
        }
        handle
    }

    fn start3(&self, ctx: *mut c_void, mut d: DescrV3) {
        let mut handle = null_mut();
        // SAFETY: a context from init and a descriptor of v3's layout.
        let r = unsafe { (self.v3.start_event)(ctx, &mut handle, &mut d) };
        assert_eq!(r, 0);
        assert!(handle.is_null());
    }

    /// What NCCL does per enqueued operation: read the shared mask, and
    /// start and stop an event only when its type is on.
    fn emit(&self, ctx: *mut c_void, mask: &c_int, d: DescrV5) {
        // SAFETY: a plain read of an int the plugin may store to.
        let on = unsafe { std::ptr::read_volatile(mask) } as u64;
        if on & d.kind == 0 {
            return;
        }
        // No handle: NCCL makes no further calls for this event.
        assert!(self.start_stop5(ctx, d).is_null());
    }

    fn teardown(&self, ctx: *mut c_void) {
        // SAFETY: a null handle and a context from init, as NCCL passes.
        unsafe {
            assert_eq!((self.v5.record_event_state)(null_mut(), 22, null_mut()), 0);
            assert_eq!((self.v5.finalize)(ctx), 0);
        }
    }
}

fn ranks(n: i64) -> Vec<ExpectedRank> {
    (0..n)
        .map(|r| ExpectedRank {
            comm_rank: r,
            global_rank: r as u64,
        })
        .collect()
}

#[test]
fn nccl_loads_the_plugin_and_collbench_toggles_and_drains_it() {
    std::env::remove_var("NCCL_PROFILER_PLUGIN");
    let ex = Explainer::install();
    let path = installed_privately(&ex);
    let nccl = Nccl::open(&path);
    assert_eq!(nccl.name(), "collbench");

    // Two communicators (two local GPUs) share NCCL's one mask; init must
    // leave it off.
    let mut mask: c_int = 0x7fff;
    let ctx = init_two_ranks(&nccl, &mut mask);
    loaded_once(&ex, &nccl, &path);
    // A null mask is the one init failure.
    assert_ne!(nccl.init5(null_mut(), 1, 0).0, 0);

    // The timed loop: recording off, NCCL emits nothing.
    nccl.emit(ctx[0], &mask, coll(0, "AllReduce", "TREE", "LL", 9));

    // One case: all_reduce on both ranks, two iterations.
    let rec = ex.start_case();
    assert_eq!(mask as u64, PROFILE_COLL | PROFILE_P2P, "recording on");
    for _ in 0..2 {
        for r in 0..2 {
            nccl.emit(
                ctx[r as usize],
                &mask,
                coll(r, "AllReduce", "RING", "LL", 2),
            );
            // Other event types are ignored even when NCCL sends them.
            let mut group = coll(r, "x", "y", "z", 1);
            group.kind = PROFILE_GROUP;
            assert!(nccl.start_stop5(ctx[r as usize], group).is_null());
        }
    }
    let e = rec.finish(&ranks(2));
    assert_eq!(mask, 0, "recording off after the case");
    assert_eq!(e.kernels_text(), "AllReduce:RING/LL/2");
    assert!(e.missing_ranks.is_empty());
    assert_eq!(e.dropped_events, 0);

    // Events after the case are not recorded (NCCL sees the mask off).
    nccl.emit(ctx[0], &mask, coll(0, "AllReduce", "TREE", "LL", 9));

    // Grouped send/recv, rank 1 silent: two kernels and a missing rank.
    let e = ex
        .record_case::<()>(&ranks(2), || {
            nccl.emit(ctx[0], &mask, p2p(0, "Send", 1, 4));
            nccl.emit(ctx[0], &mask, p2p(0, "Recv", 1, 4));
            Ok(())
        })
        .unwrap();
    assert_eq!(e.kernels_text(), "Recv:-/-/4;Send:-/-/4");
    assert_eq!(e.missing_ranks, vec![1]);

    older_nccl_through_v3(&ex, &nccl);

    // Bounded memory: more events than the ring holds are counted, not kept.
    let e = ex
        .record_case::<()>(&ranks(1), || {
            for _ in 0..10_000 {
                nccl.emit(ctx[0], &mask, coll(0, "AllGather", "RING", "SIMPLE", 24));
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(e.kernels_text(), "AllGather:RING/SIMPLE/24");
    assert_eq!(e.dropped_events, 10_000 - 8192);

    // NCCL tears down: finalize and state calls succeed.
    for c in ctx {
        nccl.teardown(c);
    }
    // Installing again returns the same plugin.
    assert_eq!(Explainer::install().plugin_path(), Some(path.as_path()));
}

/// The plugin as installed: NCCL_PROFILER_PLUGIN names it, marked as
/// collbench's, in a private directory, not yet loaded. Its path.
fn installed_privately(ex: &Explainer) -> std::path::PathBuf {
    let path = ex.plugin_path().expect("plugin installed").to_path_buf();
    assert_eq!(
        std::env::var("NCCL_PROFILER_PLUGIN").unwrap(),
        path.display().to_string()
    );
    // Marked as collbench's, so a collbench started from this one does not
    // take it for the user's.
    assert_eq!(
        std::env::var("COLLBENCH_PROFILER_PLUGIN").unwrap(),
        path.display().to_string()
    );
    {
        use std::os::unix::fs::PermissionsExt;
        let dir_mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700, "private directory");
    }
    // Before NCCL loads it, collbench cannot explain.
    assert!(ex.unavailable_reason().unwrap().contains("did not load"));
    path
}

/// Two communicators (two local GPUs) sharing NCCL's one `mask`; init
/// must leave it off. Their contexts.
fn init_two_ranks(nccl: &Nccl, mask: &mut c_int) -> [*mut c_void; 2] {
    let mut ctx = [null_mut(); 2];
    for (rank, c) in ctx.iter_mut().enumerate() {
        let (r, context) = nccl.init5(mask, 2, rank as c_int);
        assert_eq!(r, 0);
        assert!(!context.is_null());
        *c = context;
    }
    assert_eq!(*mask, 0, "starts disabled");
    ctx
}

/// Once NCCL has loaded the plugin at `path`: v5, usable, the file gone.
fn loaded_once(ex: &Explainer, nccl: &Nccl, path: &std::path::Path) {
    assert_eq!(ex.interface_version(), Some(5));
    assert!(path.exists());
    assert_eq!(ex.unavailable_reason(), None);
    // Once NCCL has loaded it, the file is gone; the library stays, and a
    // second dlopen of the path (NCCL reopening it) gets the same instance.
    assert!(!path.exists());
    assert!(!path.parent().unwrap().exists());
    let again = Nccl::open(path);
    assert!(std::ptr::eq(again.v5, nccl.v5));
}

/// An older NCCL through the v3 table: channel count is nMaxChannels.
fn older_nccl_through_v3(ex: &Explainer, nccl: &Nccl) {
    let mut mask3: c_int = 0;
    let c3 = nccl.init3(&mut mask3);
    let e = ex
        .record_case::<()>(&ranks(1), || {
            assert_eq!(
                mask3 as u64,
                PROFILE_COLL | PROFILE_P2P,
                "every mask is set"
            );
            nccl.start3(
                c3,
                DescrV3 {
                    kind: PROFILE_COLL as u8,
                    parent_obj: null_mut(),
                    rank: 0,
                    coll: CollV3 {
                        name: s("comm"),
                        comm_hash: 9,
                        seq_number: 1,
                        func: s("Broadcast"),
                        send_buff: null_mut(),
                        recv_buff: null_mut(),
                        count: 8,
                        root: 1,
                        datatype: s("ncclInt8"),
                        n_max_channels: 7,
                        n_warps: 8,
                        algo: s("NVLS"),
                        proto: s("SIMPLE"),
                    },
                },
            );
            Ok(())
        })
        .unwrap();
    assert_eq!(e.kernels_text(), "Broadcast:NVLS/SIMPLE/7");
    assert!(e.busbw_overstated);
}
