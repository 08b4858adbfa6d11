//! Installing collbench's NCCL tuner plugin and talking to it.
//!
//! The plugin (`tuner/collbench_tuner.c`, built by build.rs) travels inside
//! the binary. [`TunerPlugin::install`] writes it to a private temporary
//! directory, opens it, and points NCCL_TUNER_PLUGIN at it, so that NCCL,
//! when it creates a communicator, opens the same file and the dynamic
//! loader hands both the same instance: the rules and the override
//! collbench sets here are the ones NCCL's `getCollInfo` calls see.
//!
//! Unlike the profiler plugin, the tuner is installed only when asked for
//! (`collbench tune`, `run --tuner-config`), and a user's own
//! NCCL_TUNER_PLUGIN is an error there, not a silent fallback: running
//! untuned while claiming to tune would be worse. The file stays until the
//! process exits, since `tune` creates communicators (each of which makes
//! NCCL open the plugin again) for the whole run.

use std::ffi::{c_char, c_int, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The plugin library, as build.rs compiled it.
pub static PLUGIN_SO: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/libnccl-tuner-collbench.so"));

/// File name of the written plugin (NCCL's `libnccl-tuner-<name>.so`).
pub const PLUGIN_FILE: &str = "libnccl-tuner-collbench.so";

/// NCCL's variable naming the tuner plugin to load.
pub const ENV: &str = "NCCL_TUNER_PLUGIN";

/// Set next to NCCL_TUNER_PLUGIN when collbench sets it, so a collbench
/// started from this one (which inherits both) knows the plugin is not the
/// user's.
pub const MARK_ENV: &str = "COLLBENCH_TUNER_PLUGIN";

/// Why the plugin cannot be installed: one line with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TunerError {
    /// The user set NCCL_TUNER_PLUGIN; collbench leaves it alone.
    #[error(
        "{ENV} is set ({0}): collbench tune/--tuner-config needs its own tuner plugin; unset {ENV}"
    )]
    UserPlugin(String),
    /// Writing or opening the embedded library failed.
    #[error("cannot install collbench's tuner plugin ({0}); set TMPDIR to a directory that allows executable mappings")]
    Install(String),
    /// A tuner config file the plugin refused.
    #[error("tuner config {0}")]
    Config(String),
}

/// How often NCCL asked the plugin and how it answered, since the process
/// started (see `collbench_tuner_counters` in the C source).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// getCollInfo calls.
    pub calls: u64,
    /// Calls where an override or a rule was applied.
    pub applied: u64,
    /// Calls where the forced algorithm/protocol was not offered by NCCL
    /// (NCCL chose instead).
    pub rejected: u64,
}

/// What the last call of a collective left NCCL to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// Algorithm id (`NCCL_ALGO_*`, cost table row).
    pub algo: i32,
    /// Protocol id (`NCCL_PROTO_*`, cost table column).
    pub proto: i32,
    /// Channels the plugin set (0: NCCL's own count).
    pub channels: i32,
}

/// The plugin's exported functions, resolved from our handle.
struct Api {
    load: unsafe extern "C" fn(*const c_char) -> c_int,
    last_error: unsafe extern "C" fn() -> *const c_char,
    set_override: unsafe extern "C" fn(c_int, c_int, c_int, c_int) -> c_int,
    clear_override: unsafe extern "C" fn(),
    counters: unsafe extern "C" fn(*mut u64, *mut u64, *mut u64),
    last_choice: unsafe extern "C" fn(c_int, *mut c_int, *mut c_int, *mut c_int) -> c_int,
}

struct Installed {
    api: Api,
    path: PathBuf,
    /// Holds the directory for the life of the process (also removed at
    /// exit, as the static is never dropped).
    _dir: tempfile::TempDir,
}

/// collbench's tuner plugin in this process: install once before the first
/// NCCL communicator, then load rules or set overrides between
/// collectives. Cheap to clone; every clone is the same plugin.
#[derive(Clone)]
pub struct TunerPlugin {
    inner: Arc<Installed>,
}

static INSTALLED: OnceLock<Result<TunerPlugin, TunerError>> = OnceLock::new();

impl TunerPlugin {
    /// Installs the plugin for this process (once; later calls return the
    /// same plugin or the same error). Must run before the first NCCL
    /// communicator is created, and before threads that could call NCCL
    /// start (it sets an environment variable).
    pub fn install() -> Result<TunerPlugin, TunerError> {
        INSTALLED
            .get_or_init(|| {
                if let Some(v) = crate::embedded::users_plugin(
                    std::env::var(ENV).ok(),
                    std::env::var(MARK_ENV).ok(),
                ) {
                    return Err(TunerError::UserPlugin(v));
                }
                let installed = load().map_err(TunerError::Install)?;
                // Only now: NCCL must never get a path that does not load.
                std::env::set_var(ENV, &installed.path);
                std::env::set_var(MARK_ENV, &installed.path);
                Ok(TunerPlugin {
                    inner: Arc::new(installed),
                })
            })
            .clone()
    }

    /// Where the plugin was written (what NCCL_TUNER_PLUGIN names).
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Replaces the rules with those of a tuner CSV file; returns the rule
    /// count, or why the plugin refused the file (the old rules stay).
    pub fn load_config(&self, path: &Path) -> Result<usize, TunerError> {
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| TunerError::Config(format!("{}: a NUL in the path", path.display())))?;
        // SAFETY: `c` is a NUL-terminated path alive for the call; the
        // plugin copies what it keeps.
        let n = unsafe { (self.inner.api.load)(c.as_ptr()) };
        if n < 0 {
            return Err(TunerError::Config(self.last_error()));
        }
        Ok(n as usize)
    }

    /// Drops every rule (NCCL chooses again, unless an override is set).
    pub fn clear_config(&self) {
        // SAFETY: NULL asks the plugin to drop its rules.
        unsafe { (self.inner.api.load)(std::ptr::null()) };
    }

    /// The plugin's reason for the last failed load.
    fn last_error(&self) -> String {
        // SAFETY: the plugin returns a pointer to its own NUL-terminated
        // static buffer, valid until the next load; copied at once.
        let p = unsafe { (self.inner.api.last_error)() };
        if p.is_null() {
            return "unknown error".into();
        }
        // SAFETY: non-null, NUL-terminated (see above).
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// Forces a choice for every later call of collective `coll` (an
    /// `ncclFunc_t` id, `None` for all): `algo_proto` as cost table
    /// indices (`None`: NCCL's), `channels` 0 for NCCL's count. `false`
    /// for arguments out of range.
    pub fn set_override(
        &self,
        coll: Option<i32>,
        algo_proto: Option<(i32, i32)>,
        channels: u32,
    ) -> bool {
        let (a, p) = algo_proto.unwrap_or((-1, -1));
        let channels = c_int::try_from(channels).unwrap_or(-1);
        // SAFETY: plain integers; the plugin checks their ranges.
        unsafe { (self.inner.api.set_override)(coll.unwrap_or(-1), a, p, channels) == 0 }
    }

    /// Back to the rules (or NCCL's choice).
    pub fn clear_override(&self) {
        // SAFETY: takes no arguments.
        unsafe { (self.inner.api.clear_override)() };
    }

    /// The plugin's counters.
    pub fn counters(&self) -> Counters {
        let mut c = Counters::default();
        // SAFETY: three valid out-parameters.
        unsafe { (self.inner.api.counters)(&mut c.calls, &mut c.applied, &mut c.rejected) };
        c
    }

    /// What the last call of collective `coll` (an `ncclFunc_t` id) left
    /// NCCL to run; `None` before the first such call.
    pub fn last_choice(&self, coll: i32) -> Option<Choice> {
        let (mut algo, mut proto, mut channels) = (0, 0, 0);
        // SAFETY: three valid out-parameters; the plugin checks `coll`.
        let r = unsafe { (self.inner.api.last_choice)(coll, &mut algo, &mut proto, &mut channels) };
        (r == 0).then_some(Choice {
            algo,
            proto,
            channels,
        })
    }
}

/// NCCL's `ncclFunc_t` id of a collective, where its tuner interface
/// covers it.
pub fn nccl_func(op: collbench_core::Collective) -> Option<i32> {
    use collbench_core::Collective::*;
    match op {
        Broadcast => Some(0),
        Reduce => Some(1),
        AllGather => Some(2),
        ReduceScatter => Some(3),
        AllReduce => Some(4),
        _ => None,
    }
}

/// Writes the plugin into a private directory and opens it.
fn load() -> Result<Installed, String> {
    let (api, written) =
        crate::embedded::install("collbench-tuner-", PLUGIN_FILE, PLUGIN_SO, open)?;
    Ok(Installed {
        api,
        path: written.path,
        _dir: written.dir,
    })
}

/// Opens the written plugin and takes its functions.
fn open(path: &Path) -> Result<Api, String> {
    // SAFETY: our own library: it has no initialisers.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
    use crate::embedded::function;
    // SAFETY: the symbols are the functions collbench_tuner.c exports,
    // with these C signatures; the library is never unloaded (forgotten
    // below), so the pointers stay valid.
    let api = unsafe {
        Api {
            load: function(&lib, "collbench_tuner_load")?,
            last_error: function(&lib, "collbench_tuner_last_error")?,
            set_override: function(&lib, "collbench_tuner_set_override")?,
            clear_override: function(&lib, "collbench_tuner_clear_override")?,
            counters: function(&lib, "collbench_tuner_counters")?,
            last_choice: function(&lib, "collbench_tuner_last_choice")?,
        }
    };
    // Never unloaded: NCCL holds the same instance and calls into it until
    // the process ends.
    std::mem::forget(lib);
    Ok(api)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_plugin_is_refused_in_one_line_with_the_fix() {
        let e = TunerError::UserPlugin("/opt/t.so".into()).to_string();
        assert_eq!(
            e,
            "NCCL_TUNER_PLUGIN is set (/opt/t.so): collbench tune/--tuner-config needs its own tuner plugin; unset NCCL_TUNER_PLUGIN"
        );
    }

    #[test]
    fn func_ids_follow_nccl() {
        use collbench_core::Collective;
        assert_eq!(nccl_func(Collective::AllReduce), Some(4));
        assert_eq!(nccl_func(Collective::AllGather), Some(2));
        assert_eq!(nccl_func(Collective::AllToAll), None);
    }
}
