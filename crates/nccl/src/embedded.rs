//! Plugins that travel inside collbench (the profiler for `--explain`, the
//! tuner for `tune`): each is written to a private directory (0700, the
//! library 0500, created exclusively, so nobody can swap it) and opened from
//! there; the directory goes when the process exits. NCCL opens the same
//! path, so collbench and NCCL share one loaded instance.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

/// A library written by [`install`]: its path and the directory holding it
/// (removed on drop, and at exit in any case).
pub(crate) struct Written {
    pub(crate) path: PathBuf,
    pub(crate) dir: tempfile::TempDir,
}

/// Writes `bytes` as `file` into a fresh private directory named
/// `prefix...` and calls `open` on it: under the temporary directory first,
/// then the user's runtime directory (a /tmp mounted noexec cannot hold a
/// library, which `open` finds out). Returns what `open` gave, or every
/// place's error in one line.
pub(crate) fn install<T>(
    prefix: &str,
    file: &str,
    bytes: &[u8],
    mut open: impl FnMut(&Path) -> Result<T, String>,
) -> Result<(T, Written), String> {
    let mut errors = Vec::new();
    for base in candidate_dirs() {
        match write_in(&base, prefix, file, bytes).and_then(|w| Ok((open(&w.path)?, w))) {
            Ok(done) => return Ok(done),
            Err(e) => errors.push(format!("{}: {e}", base.display())),
        }
    }
    Err(errors.join("; "))
}

/// The temporary directory, then `$XDG_RUNTIME_DIR`.
fn candidate_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![std::env::temp_dir()];
    if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR") {
        dirs.push(PathBuf::from(run));
    }
    dirs
}

fn write_in(base: &Path, prefix: &str, file: &str, bytes: &[u8]) -> Result<Written, String> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(base)
        .map_err(|e| format!("cannot create a directory: {e}"))?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("cannot make the directory private: {e}"))?;
    remove_at_exit(dir.path());
    let path = dir.path().join(file);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o500)
        .open(&path)
        .map_err(|e| format!("cannot write the plugin: {e}"))?;
    f.write_all(bytes)
        .map_err(|e| format!("cannot write the plugin: {e}"))?;
    Ok(Written { path, dir })
}

/// Directories to remove at exit: the plugins live in process-wide statics
/// that are never dropped.
static DIRS_AT_EXIT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

fn remove_at_exit(dir: &Path) {
    DIRS_AT_EXIT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(dir.to_path_buf());
    AT_EXIT.call_once(|| {
        // SAFETY: registers a plain `extern "C"` function without
        // arguments, as atexit expects.
        unsafe { libc::atexit(remove_dirs_at_exit) };
    });
}

extern "C" fn remove_dirs_at_exit() {
    if let Ok(dirs) = DIRS_AT_EXIT.lock() {
        for dir in dirs.iter() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The function `name` that an embedded plugin exports, as a plain function
/// pointer; the error names the missing symbol. The pointer stays valid
/// only while the library is mapped: both plugins are never unloaded.
///
/// # Safety
/// `T` must be the function's C signature as the plugin's source declares
/// it.
pub(crate) unsafe fn function<T: Copy>(lib: &libloading::Library, name: &str) -> Result<T, String> {
    // SAFETY: the caller vouches for `T`; libloading appends the NUL.
    unsafe { lib.get::<T>(name.as_bytes()) }
        .map(|f| *f)
        .map_err(|e| format!("the plugin lacks {name} ({e})"))
}

/// The user's own plugin variable (NCCL_PROFILER_PLUGIN, NCCL_TUNER_PLUGIN),
/// if one is set: a value that is not empty and not one an earlier
/// collbench set (`mark`, the COLLBENCH_*_PLUGIN twin it sets beside it).
pub(crate) fn users_plugin(value: Option<String>, mark: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty() && Some(v) != mark.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plugin_collbench_did_not_set_is_the_users() {
        let some = |s: &str| Some(s.to_string());
        assert_eq!(users_plugin(None, None), None);
        assert_eq!(users_plugin(some(""), None), None);
        assert_eq!(users_plugin(some("/a.so"), None), some("/a.so"));
        assert_eq!(users_plugin(some("/a.so"), some("/a.so")), None);
        assert_eq!(users_plugin(some("/b.so"), some("/a.so")), some("/b.so"));
    }

    #[test]
    fn the_library_is_private_and_open_decides() {
        use std::os::unix::fs::PermissionsExt;
        let (seen, w) = install("collbench-test-", "lib.so", b"bytes", |p| {
            std::fs::read(p).map_err(|e| e.to_string())
        })
        .unwrap();
        assert_eq!(seen, b"bytes");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(w.dir.path()), 0o700);
        assert_eq!(mode(&w.path), 0o500);
        let e = install("collbench-test-", "lib.so", b"x", |_| {
            Err::<(), _>("no exec".to_string())
        })
        .err()
        .unwrap();
        assert!(e.contains("no exec"), "{e}");
    }
}
