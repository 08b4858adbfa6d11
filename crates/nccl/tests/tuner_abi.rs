//! The tuner plugin end to end, without a GPU: the library build.rs
//! compiled is installed as collbench installs it, then driven exactly as
//! NCCL 2.28 drives it (dlopen of NCCL_TUNER_PLUGIN, the `ncclTuner_v5`
//! table, `init` per communicator, `getCollInfo` with a contiguous
//! `float[7][3]` cost table cast to `float**`), while collbench sets
//! overrides, reads counters and loads tuner CSV files through its API.
//!
//! One test function: the plugin and the environment variable are
//! process-wide.

use collbench_core::Collective;
use collbench_nccl::tuner::{nccl_func, Choice, Counters, TunerPlugin, ENV};
use std::ffi::{c_char, c_int, c_void};
use std::ptr::null_mut;

const NUM_ALGO: usize = 7;
const NUM_PROTO: usize = 3;
const IGNORE: f32 = -1.0;
const RING: usize = 1;
const TREE: usize = 0;
const NVLS: usize = 4;
const LL: usize = 0;
const LL128: usize = 1;
const SIMPLE: usize = 2;

// ncclTuner_v5 (NCCL 2.28 ext-tuner/example/nccl/tuner_v5.h). The logger
// is variadic in C; the tests pass none (NULL), which the plugin accepts.
#[repr(C)]
struct TunerV5 {
    name: *const c_char,
    init: unsafe extern "C" fn(
        *mut *mut c_void,
        u64,
        usize,
        usize,
        *const c_void,
        *mut c_void,
        *mut c_void,
    ) -> c_int,
    get_coll_info: unsafe extern "C" fn(
        *mut c_void,
        c_int,
        usize,
        c_int,
        *mut *mut f32,
        c_int,
        c_int,
        c_int,
        *mut c_int,
    ) -> c_int,
    finalize: unsafe extern "C" fn(*mut c_void) -> c_int,
}

/// A cost table as NCCL builds one: every pair offered, ring/simple
/// cheapest, NVLS not offered.
fn table() -> [[f32; NUM_PROTO]; NUM_ALGO] {
    let mut t = [[IGNORE; NUM_PROTO]; NUM_ALGO];
    for (a, row) in t.iter_mut().enumerate() {
        for (p, c) in row.iter_mut().enumerate() {
            *c = 10.0 + (a * NUM_PROTO + p) as f32;
        }
    }
    t[RING][SIMPLE] = 1.0;
    t[NVLS] = [IGNORE; NUM_PROTO];
    t
}

/// The pair NCCL picks from a table: the lowest offered cost.
fn nccl_pick(t: &[[f32; NUM_PROTO]; NUM_ALGO]) -> (usize, usize) {
    let mut best = (0, 0);
    let mut cost = f32::MAX;
    for (a, row) in t.iter().enumerate() {
        for (p, &c) in row.iter().enumerate() {
            if c != IGNORE && c >= 0.0 && c < cost {
                cost = c;
                best = (a, p);
            }
        }
    }
    best
}

struct Comm<'a> {
    tuner: &'a TunerV5,
    ctx: *mut c_void,
}

impl Comm<'_> {
    /// One getCollInfo call: (algorithm, protocol) NCCL would now run and
    /// the channel count it would use (`start` if the plugin left it).
    fn call(&self, coll: Collective, bytes: usize, start: c_int) -> ((usize, usize), c_int) {
        let mut t = table();
        let mut channels = start;
        // SAFETY: as NCCL calls it: the context from init, a contiguous
        // [7][3] float table cast to float**, a valid channel out-pointer.
        let r = unsafe {
            (self.tuner.get_coll_info)(
                self.ctx,
                nccl_func(coll).unwrap(),
                bytes,
                1,
                t.as_mut_ptr() as *mut *mut f32,
                NUM_ALGO as c_int,
                NUM_PROTO as c_int,
                0,
                &mut channels,
            )
        };
        assert_eq!(r, 0, "getCollInfo failed");
        (nccl_pick(&t), channels)
    }
}

#[test]
fn the_tuner_plugin_works_as_nccl_drives_it() {
    std::env::remove_var(ENV);
    let plugin = TunerPlugin::install().expect("installs");
    // Installing again gives the same plugin.
    assert_eq!(TunerPlugin::install().unwrap().path(), plugin.path());
    let path = std::env::var(ENV).expect("NCCL_TUNER_PLUGIN is set");
    assert_eq!(std::path::Path::new(&path), plugin.path());

    // NCCL: dlopen the path, dlsym the v5 table.
    // SAFETY: the library collbench wrote; no initialisers.
    let lib = unsafe { libloading::Library::new(&path) }.expect("NCCL can open the plugin");
    // SAFETY: ncclTunerPlugin_v5 is a const ncclTuner_v5_t in the plugin,
    // laid out as `TunerV5`.
    let tuner: &TunerV5 = unsafe {
        let sym: libloading::Symbol<*const TunerV5> = lib.get(b"ncclTunerPlugin_v5\0").unwrap();
        &**sym
    };
    // SAFETY: the plugin's name is a static C string.
    let name = unsafe { std::ffi::CStr::from_ptr(tuner.name) };
    assert_eq!(name.to_str().unwrap(), "collbench");

    let mut ctx = null_mut();
    // SAFETY: init as NCCL calls it for a 2-rank, 1-node communicator; no
    // logger, no NVLink domain info or constants (the plugin reads neither).
    let r = unsafe { (tuner.init)(&mut ctx, 42, 2, 1, std::ptr::null(), null_mut(), null_mut()) };
    assert_eq!(r, 0);
    assert!(!ctx.is_null());
    let comm = Comm { tuner, ctx };

    let after = nothing_set_is_nccls_choice(&plugin, &comm);
    overrides_come_first(&plugin, &comm, after);
    a_tuner_csv_loads(&plugin, &comm);

    let total: Counters = plugin.counters();
    assert!(total.calls >= 10, "{total:?}");
    // SAFETY: the context init made, finalised once.
    assert_eq!(unsafe { (tuner.finalize)(ctx) }, 0);
}

/// Nothing set: NCCL's own choice, channels untouched; the counters after.
fn nothing_set_is_nccls_choice(plugin: &TunerPlugin, comm: &Comm<'_>) -> Counters {
    let before = plugin.counters();
    assert_eq!(
        comm.call(Collective::AllReduce, 1 << 20, 24),
        ((RING, SIMPLE), 24)
    );
    assert_eq!(
        plugin.last_choice(4),
        Some(Choice {
            algo: RING as i32,
            proto: SIMPLE as i32,
            channels: 24
        })
    );
    let after = plugin.counters();
    assert_eq!(after.calls, before.calls + 1);
    assert_eq!(after.applied, before.applied);
    after
}

/// Overrides: per collective or for all, rejected when NCCL does not
/// offer the pair, refused out of range (`after`: the counters before).
fn overrides_come_first(plugin: &TunerPlugin, comm: &Comm<'_>, after: Counters) {
    // An override for all_reduce: tree/ll128 on 8 channels.
    assert!(plugin.set_override(Some(4), Some((TREE as i32, LL128 as i32)), 8));
    assert_eq!(
        comm.call(Collective::AllReduce, 1 << 20, 24),
        ((TREE, LL128), 8)
    );
    // ... not for all_gather.
    assert_eq!(
        comm.call(Collective::AllGather, 1 << 20, 24),
        ((RING, SIMPLE), 24)
    );
    let c = plugin.counters();
    assert_eq!(
        (c.applied - after.applied, c.rejected - after.rejected),
        (1, 0)
    );

    // A pair NCCL does not offer (NVLS here) is rejected, and NCCL's own
    // choice stands.
    assert!(plugin.set_override(None, Some((NVLS as i32, SIMPLE as i32)), 0));
    assert_eq!(
        comm.call(Collective::AllGather, 1 << 20, 24),
        ((RING, SIMPLE), 24)
    );
    assert_eq!(plugin.counters().rejected, c.rejected + 1);

    // Arguments out of range are refused.
    assert!(!plugin.set_override(Some(9), None, 0));
    assert!(!plugin.set_override(None, Some((7, 0)), 0));
    plugin.clear_override();
    assert_eq!(
        comm.call(Collective::AllReduce, 1 << 20, 24),
        ((RING, SIMPLE), 24)
    );
}

/// The tuner CSV `tune` writes, loaded as `--tuner-config` loads it.
fn a_tuner_csv_loads(plugin: &TunerPlugin, comm: &Comm<'_>) {
    // A tuner CSV as `tune` writes it and `--tuner-config` loads it.
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("tuner.csv");
    std::fs::write(
        &csv,
        "# collbench tune\nallreduce,0,65536,tree,ll,-1,1,2\nallgather,1048576,4194304,ring,simple,16,-1,-1,-1,-1\n",
    )
    .unwrap();
    assert_eq!(plugin.load_config(&csv).unwrap(), 2);
    assert_eq!(comm.call(Collective::AllReduce, 4096, 24), ((TREE, LL), 24));
    assert_eq!(
        comm.call(Collective::AllReduce, 65537, 24),
        ((RING, SIMPLE), 24)
    );
    assert_eq!(
        comm.call(Collective::AllGather, 2 << 20, 24),
        ((RING, SIMPLE), 16)
    );
    // An override still comes first.
    assert!(plugin.set_override(None, None, 4));
    assert_eq!(
        comm.call(Collective::AllReduce, 4096, 24),
        ((RING, SIMPLE), 4)
    );
    plugin.clear_override();

    // A malformed file is refused with its line; the old rules stay.
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "allreduce,0,65536,tree,ll,-1,1\n").unwrap();
    let e = plugin.load_config(&bad).unwrap_err().to_string();
    assert!(e.starts_with("tuner config "), "{e}");
    assert!(e.contains("line 1"), "{e}");
    assert_eq!(comm.call(Collective::AllReduce, 4096, 24), ((TREE, LL), 24));
    plugin.clear_config();
    assert_eq!(
        comm.call(Collective::AllReduce, 4096, 24),
        ((RING, SIMPLE), 24)
    );
}
