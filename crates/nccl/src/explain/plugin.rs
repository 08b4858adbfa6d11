//! Installing collbench's NCCL profiler plugin and talking to it.
//!
//! The plugin (`profiler/collbench_profiler.c`, built by build.rs) travels
//! inside the binary. [`Explainer::install`] writes it to a private
//! temporary directory, opens it, and points NCCL_PROFILER_PLUGIN at it, so
//! that NCCL, when it creates the first communicator, opens the same file
//! and the dynamic loader hands both the same instance. A user's own
//! NCCL_PROFILER_PLUGIN is left alone: collbench then says, once, that it
//! cannot explain, and every explanation carries the reason.

use super::events::{ProfilerEvent, RawEvent};
use super::rows::{self, ExpectedRank};
use collbench_core::Explanation;
use std::ffi::c_int;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The plugin library, as build.rs compiled it.
pub static PLUGIN_SO: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/libnccl-profiler-collbench.so"));

/// File name of the written plugin (NCCL's `libnccl-profiler-<name>.so`).
pub const PLUGIN_FILE: &str = "libnccl-profiler-collbench.so";

/// NCCL's variable naming the profiler plugin to load.
pub const ENV: &str = "NCCL_PROFILER_PLUGIN";

/// Set next to NCCL_PROFILER_PLUGIN when collbench sets it, so a collbench
/// started from this one (which inherits both) knows the plugin is not the
/// user's.
pub const MARK_ENV: &str = "COLLBENCH_PROFILER_PLUGIN";

/// Layout version of the records the plugin hands back.
const ABI: u32 = 1;

/// How long a case may take to report its events after it finished: NCCL
/// reports them when it launches, except for work it hands to a host
/// callback.
const EVENT_WAIT: Duration = Duration::from_millis(200);

/// The plugin's exported functions, resolved from our handle.
struct Plugin {
    set_recording: unsafe extern "C" fn(c_int),
    drain: unsafe extern "C" fn(*mut RawEvent, usize, *mut u64) -> usize,
    inits: unsafe extern "C" fn(*mut c_int) -> c_int,
    path: PathBuf,
    /// The directory holding the file, until NCCL has loaded it (the
    /// library stays mapped; a later dlopen of the same path finds the
    /// loaded instance by name). Removed then, or at exit.
    dir: Mutex<Option<tempfile::TempDir>>,
    /// Serialises cases: one recording at a time.
    case: Mutex<()>,
}

/// Why explanations are missing, or the installed plugin.
enum State {
    Ready(Plugin),
    Off(String),
}

/// Asks NCCL what it ran: install once before the first communicator, then
/// [`Explainer::start_case`] / [`CaseRecording::finish`] around one untimed
/// run of a case. Cheap to clone; every clone is the same plugin.
#[derive(Clone)]
pub struct Explainer {
    state: Arc<State>,
}

static INSTALLED: OnceLock<Explainer> = OnceLock::new();

impl Explainer {
    /// Installs the plugin for this process (once; later calls return the
    /// same explainer). Must run before the first NCCL communicator is
    /// created. Never fails: when the plugin cannot be used, the explainer
    /// says why in every explanation, and the first call prints that on
    /// stderr in one line.
    pub fn install() -> Explainer {
        Explainer::install_with(true)
    }

    /// [`Explainer::install`] without the stderr line, for every process
    /// but the first of a job (the first says it for all); the line is
    /// [`Explainer::notice`].
    pub fn install_quiet() -> Explainer {
        Explainer::install_with(false)
    }

    fn install_with(announce: bool) -> Explainer {
        INSTALLED
            .get_or_init(|| {
                let user = crate::embedded::users_plugin(
                    std::env::var(ENV).ok(),
                    std::env::var(MARK_ENV).ok(),
                );
                let state = match user {
                    Some(v) => State::Off(user_plugin_reason(&v)),
                    None => match load() {
                        Ok(plugin) => {
                            // Only now: NCCL must never get a path that
                            // does not load.
                            std::env::set_var(ENV, &plugin.path);
                            std::env::set_var(MARK_ENV, &plugin.path);
                            State::Ready(plugin)
                        }
                        Err(e) => State::Off(e),
                    },
                };
                let explainer = Explainer {
                    state: Arc::new(state),
                };
                if let (true, Some(line)) = (announce, explainer.notice()) {
                    collbench_core::diag::line(&line);
                }
                explainer
            })
            .clone()
    }

    /// The one line saying why nothing can be explained (the user's own
    /// NCCL_PROFILER_PLUGIN, a plugin that could not be installed), if so.
    pub fn notice(&self) -> Option<String> {
        match &*self.state {
            State::Off(why) => Some(format!(
                "collbench: cannot explain which algorithm NCCL used: {why}"
            )),
            State::Ready(_) => None,
        }
    }

    /// An explainer that explains nothing, for `reason`.
    pub fn off(reason: impl Into<String>) -> Explainer {
        Explainer {
            state: Arc::new(State::Off(reason.into())),
        }
    }

    /// Why explanations are unavailable, if they are.
    pub fn unavailable_reason(&self) -> Option<String> {
        match &*self.state {
            State::Ready(p) => {
                let mut version = 0;
                // SAFETY: a plain getter of the loaded plugin.
                let inits = unsafe { (p.inits)(&mut version) };
                if inits > 0 {
                    // NCCL has it: the file is no longer needed.
                    p.dir.lock().unwrap_or_else(|e| e.into_inner()).take();
                }
                (inits == 0).then(|| {
                    "NCCL did not load collbench's profiler plugin (NCCL before 2.24 has no profiler interface collbench supports, or the plugin was installed after NCCL's first communicator)".to_string()
                })
            }
            State::Off(why) => Some(why.clone()),
        }
    }

    /// Where the plugin was written, when it was.
    pub fn plugin_path(&self) -> Option<&Path> {
        match &*self.state {
            State::Ready(p) => Some(&p.path),
            State::Off(_) => None,
        }
    }

    /// The profiler interface NCCL chose (2 to 5), once it loaded the
    /// plugin.
    pub fn interface_version(&self) -> Option<u32> {
        let State::Ready(p) = &*self.state else {
            return None;
        };
        let mut version = 0;
        // SAFETY: a plain getter of the loaded plugin.
        let inits = unsafe { (p.inits)(&mut version) };
        (inits > 0).then_some(version as u32)
    }

    /// Starts recording: events of operations enqueued from now on are
    /// kept. Anything left from before is discarded.
    pub fn start_case(&self) -> CaseRecording<'_> {
        let State::Ready(p) = &*self.state else {
            return CaseRecording {
                plugin: None,
                _guard: None,
            };
        };
        let guard = p.case.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: plain calls into the loaded plugin.
        unsafe { (p.set_recording)(0) };
        let _stale = drain(p);
        // SAFETY: as above.
        unsafe { (p.set_recording)(1) };
        CaseRecording {
            plugin: Some(p),
            _guard: Some(guard),
        }
    }
}

/// Recording for one case; [`CaseRecording::finish`] (or dropping it)
/// switches recording off again.
pub struct CaseRecording<'a> {
    plugin: Option<&'a Plugin>,
    _guard: Option<std::sync::MutexGuard<'a, ()>>,
}

impl CaseRecording<'_> {
    /// Stops recording and returns what NCCL reported for the case on
    /// `expected` ranks, waiting briefly for ranks that have not reported
    /// yet.
    pub fn finish(self, expected: &[ExpectedRank]) -> Explanation {
        let Some(p) = self.plugin else {
            return Explanation::unavailable("collbench's profiler plugin is not installed");
        };
        // SAFETY: plain call into the loaded plugin.
        unsafe { (p.set_recording)(0) };
        let (mut events, mut dropped) = drain(p);
        let deadline = Instant::now() + EVENT_WAIT;
        while !rows::all_reported(&events, expected) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
            let (more, lost) = drain(p);
            events.extend(more);
            dropped += lost;
        }
        rows::explain_case(&events, expected, dropped)
    }
}

impl Drop for CaseRecording<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.plugin {
            // SAFETY: plain call into the loaded plugin; idempotent.
            unsafe { (p.set_recording)(0) };
        }
    }
}

impl Explainer {
    /// One case, start to finish: recording on, `run_once`, recording off,
    /// what NCCL reported. `run_once` must leave the case finished on
    /// every local GPU.
    pub fn record_case<E>(
        &self,
        expected: &[ExpectedRank],
        run_once: impl FnOnce() -> Result<(), E>,
    ) -> Result<Explanation, E> {
        if let Some(why) = self.unavailable_reason() {
            // Nothing would be recorded: the case need not run at all.
            return Ok(Explanation::unavailable(why));
        }
        let recording = self.start_case();
        run_once()?;
        Ok(recording.finish(expected))
    }
}

/// Everything the plugin holds now, and the events it lost since the last
/// drain.
fn drain(p: &Plugin) -> (Vec<ProfilerEvent>, u64) {
    let mut out = Vec::new();
    let mut lost_total = 0;
    let mut buf = vec![RawEvent::default(); 1024];
    loop {
        let mut lost = 0u64;
        // SAFETY: `buf` has room for `buf.len()` records of the layout the
        // plugin writes (checked at load through its ABI and size).
        let n = unsafe { (p.drain)(buf.as_mut_ptr(), buf.len(), &mut lost) };
        lost_total += lost;
        out.extend(
            buf[..n.min(buf.len())]
                .iter()
                .filter_map(ProfilerEvent::from_raw),
        );
        if n < buf.len() {
            return (out, lost_total);
        }
    }
}

/// The line for a user's own plugin.
fn user_plugin_reason(value: &str) -> String {
    format!("{ENV} is set ({value}) and collbench leaves the user's profiler plugin in place; unset {ENV} to see NCCL's algorithm, protocol and channels")
}

/// Writes the plugin into a private directory and opens it.
fn load() -> Result<Plugin, String> {
    let (plugin, written) = crate::embedded::install(
        "collbench-profiler-",
        PLUGIN_FILE,
        PLUGIN_SO,
        open,
    )
    .map_err(|e| {
        format!(
            "cannot install the profiler plugin ({e}); set TMPDIR to a directory that allows executable mappings"
        )
    })?;
    let crate::embedded::Written { path, dir } = written;
    Ok(Plugin {
        path,
        dir: Mutex::new(Some(dir)),
        ..plugin
    })
}

/// Opens the written plugin and checks its record layout.
fn open(path: &Path) -> Result<Plugin, String> {
    // SAFETY: our own library: its initialisers are empty.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
    use crate::embedded::function;
    // SAFETY: the symbols are the functions collbench_profiler.c exports,
    // with these signatures; the ABI and record size are checked before any
    // record is read.
    let plugin = unsafe {
        let abi: unsafe extern "C" fn() -> u32 = function(&lib, "collbench_profiler_abi")?;
        let size: unsafe extern "C" fn() -> usize =
            function(&lib, "collbench_profiler_event_size")?;
        if abi() != ABI || size() != std::mem::size_of::<RawEvent>() {
            return Err(format!(
                "the embedded plugin's record layout (abi {}, {} bytes) is not this build's",
                abi(),
                size()
            ));
        }
        Plugin {
            set_recording: function(&lib, "collbench_profiler_set_recording")?,
            drain: function(&lib, "collbench_profiler_drain")?,
            inits: function(&lib, "collbench_profiler_inits")?,
            path: path.to_path_buf(),
            dir: Mutex::new(None),
            case: Mutex::new(()),
        }
    };
    // Never unloaded: NCCL holds the same instance and may call into it
    // until the process ends.
    std::mem::forget(lib);
    Ok(plugin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_plugin_reason_names_the_variable_and_the_fix() {
        let r = user_plugin_reason("/opt/p.so");
        assert!(r.contains("NCCL_PROFILER_PLUGIN is set (/opt/p.so)"), "{r}");
        assert!(r.contains("unset NCCL_PROFILER_PLUGIN"), "{r}");
    }

    #[test]
    fn an_off_explainer_explains_without_running() {
        let ex = Explainer::off("because");
        let mut ran = false;
        let e = ex
            .record_case::<()>(&[], || {
                ran = true;
                Ok(())
            })
            .unwrap();
        assert!(!ran);
        assert_eq!(e.unavailable.as_deref(), Some("because"));
        assert_eq!(ex.plugin_path(), None);
        assert_eq!(ex.interface_version(), None);
        let line = ex.notice().unwrap();
        assert!(line.starts_with("collbench: cannot explain"), "{line}");
        assert!(!line.contains('\n'));
    }
}
