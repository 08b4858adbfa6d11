//! Finding and opening libnccl by path.
//!
//! NCCL's runtime packages and the Python wheel ship only `libnccl.so.2`
//! (no `libnccl.so` symlink), so collbench searches for it itself instead
//! of relying on a loader that wants the development symlink.

use std::path::{Path, PathBuf};

/// Where a library was found and its version code (e.g. 22803).
#[derive(Debug, Clone)]
pub struct FoundNccl {
    pub path: PathBuf,
    pub version_code: i32,
}

impl FoundNccl {
    /// `2.28.3` from 22803 (and the pre-2.9 encoding 2708 -> `2.7.8`).
    /// A negative code (never returned by a real NCCL) reads as 0.0.0.
    pub fn version_string(&self) -> String {
        collbench_core::nccl_version::text(u64::try_from(self.version_code).unwrap_or(0))
    }
}

/// The places searched, in order: `--nccl-lib`, `COLLBENCH_NCCL_LIB`,
/// `$NCCL_HOME/lib`, each folder of `LD_LIBRARY_PATH`, the NVIDIA Python
/// wheel installed beside the running binary `exe` (see [`beside_exe`]),
/// the system library folders, and the wheel inside common prefixes.
pub fn candidates(
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    exe: Option<&Path>,
) -> Vec<PathBuf> {
    let mut c = Vec::new();
    if let Some(p) = explicit {
        c.push(p.to_path_buf());
        return c;
    }
    let lib_in = |dir: &Path| dir.join("libnccl.so.2");
    if let Some(p) = env("COLLBENCH_NCCL_LIB").filter(|s| !s.is_empty()) {
        c.push(PathBuf::from(p));
    }
    if let Some(h) = env("NCCL_HOME").filter(|s| !s.is_empty()) {
        c.push(lib_in(&Path::new(&h).join("lib")));
    }
    if let Some(ld) = env("LD_LIBRARY_PATH") {
        for d in ld.split(':').filter(|d| !d.is_empty()) {
            c.push(lib_in(Path::new(d)));
        }
    }
    // `pip install collbench[cu12]` puts NCCL in the same environment as
    // the binary: chosen with it, so it goes before the system's.
    if let Some(exe) = exe {
        c.extend(beside_exe(exe));
    }
    for d in [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
        "/usr/local/cuda/lib64",
        "/opt/nccl/lib",
    ] {
        c.push(lib_in(Path::new(d)));
    }
    // The Python wheel (nvidia-nccl-cu12/cu13) inside common prefixes.
    for root in ["/usr/local/lib", "/usr/lib", "/opt"] {
        if let Ok(entries) = glob_site_packages(Path::new(root)) {
            c.extend(entries);
        }
    }
    c
}

/// The NVIDIA NCCL wheel in the Python environment that holds the binary
/// `exe`: pip puts a wheel's program in `<prefix>/bin` and its libraries
/// in `<prefix>/lib/python3.*/site-packages`, the same prefix for a
/// virtual environment, `pip install --user` (`~/.local`) or a system
/// Python. Only libraries that exist are listed.
pub fn beside_exe(exe: &Path) -> Vec<PathBuf> {
    let prefix = exe.parent().and_then(Path::parent);
    prefix
        .map(|p| site_packages_nccl(&p.join("lib")))
        .unwrap_or_default()
}

/// `<root>/python3*/{site,dist}-packages/nvidia/nccl/lib/libnccl.so.2`
/// and virtual environments one level down (`/opt/*/.venv/lib/...`).
fn glob_site_packages(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = site_packages_nccl(root);
    for e in std::fs::read_dir(root)?.flatten() {
        out.extend(site_packages_nccl(&e.path().join(".venv/lib")));
        out.extend(site_packages_nccl(&e.path().join("lib")));
    }
    Ok(out)
}

/// The wheel's `libnccl.so.2` under `lib_dir/python3*/{site,dist}-packages`.
fn site_packages_nccl(lib_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(lib_dir) else {
        return out;
    };
    let mut pythons: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path())
        .collect();
    // read_dir's order is the file system's: sorted, a run is repeatable.
    pythons.sort();
    for py in pythons {
        for sub in ["site-packages", "dist-packages"] {
            let p = py.join(sub).join("nvidia/nccl/lib/libnccl.so.2");
            if p.exists() {
                out.push(p);
            }
        }
    }
    out
}

/// Error when no usable NCCL is found: lists every place tried.
#[derive(Debug, thiserror::Error)]
#[error("NCCL not found: tried {}; install NCCL (libnccl2) or pass --nccl-lib PATH / set COLLBENCH_NCCL_LIB", tried.join(", "))]
pub struct NotFound {
    pub tried: Vec<String>,
}

/// Opens the first loadable candidate and reads its version.
pub fn open(explicit: Option<&Path>) -> Result<(libloading::Library, FoundNccl), NotFound> {
    let env = |k: &str| std::env::var(k).ok();
    let exe = std::env::current_exe().ok();
    let mut tried = Vec::new();
    for path in candidates(explicit, &env, exe.as_deref()) {
        if explicit.is_none() && !path.exists() {
            tried.push(format!("{} (absent)", path.display()));
            continue;
        }
        // SAFETY: loading a shared library runs its initialisers; NCCL's
        // only set up its own state. The path is one the user or the
        // system's library folders name as libnccl.
        match unsafe { libloading::Library::new(&path) } {
            Ok(lib) => {
                let mut v = 0i32;
                // SAFETY: ncclGetVersion(int*) writes one int through its
                // argument, here `v`, a live local; the symbol's type is the
                // one nccl.h declares, and `lib` stays loaded for the call.
                let ok = unsafe {
                    lib.get::<unsafe extern "C" fn(*mut i32) -> i32>(b"ncclGetVersion\0")
                        .map(|f| f(&mut v) == 0)
                        .unwrap_or(false)
                };
                if ok {
                    return Ok((
                        lib,
                        FoundNccl {
                            path,
                            version_code: v,
                        },
                    ));
                }
                tried.push(format!("{} (no ncclGetVersion)", path.display()));
            }
            Err(e) => tried.push(format!("{} ({e})", path.display())),
        }
    }
    Err(NotFound { tried })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_order() {
        let env = |k: &str| match k {
            "COLLBENCH_NCCL_LIB" => Some("/x/libnccl.so.2".to_string()),
            "NCCL_HOME" => Some("/nccl".to_string()),
            "LD_LIBRARY_PATH" => Some("/a::/b".to_string()),
            _ => None,
        };
        let c = candidates(None, &env, None);
        let s: Vec<String> = c.iter().take(4).map(|p| p.display().to_string()).collect();
        assert_eq!(
            s,
            [
                "/x/libnccl.so.2",
                "/nccl/lib/libnccl.so.2",
                "/a/libnccl.so.2",
                "/b/libnccl.so.2"
            ]
        );
        let only = candidates(Some(Path::new("/mine.so")), &env, None);
        assert_eq!(only, vec![PathBuf::from("/mine.so")]);
    }

    /// `pip install collbench[cu12]` into a virtual environment: the
    /// binary in `<venv>/bin`, NCCL in the same venv's site-packages.
    #[test]
    fn the_wheel_beside_the_binary_is_found_after_the_users_paths() {
        let venv = tempfile::tempdir().unwrap();
        let lib = venv
            .path()
            .join("lib/python3.12/site-packages/nvidia/nccl/lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join("libnccl.so.2"), b"").unwrap();
        std::fs::create_dir_all(venv.path().join("bin")).unwrap();
        let exe = venv.path().join("bin/collbench");

        assert_eq!(beside_exe(&exe), vec![lib.join("libnccl.so.2")]);
        let env = |k: &str| (k == "LD_LIBRARY_PATH").then(|| "/a".to_string());
        let c = candidates(None, &env, Some(&exe));
        assert_eq!(c[0], PathBuf::from("/a/libnccl.so.2"));
        assert_eq!(c[1], lib.join("libnccl.so.2"));
        // A binary outside any Python environment adds nothing.
        assert!(beside_exe(Path::new("/nonexistent-prefix/bin/collbench")).is_empty());
    }

    #[test]
    fn missing_library_is_a_clear_error() {
        let e = open(Some(Path::new("/nonexistent/libnccl.so.2"))).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("/nonexistent/libnccl.so.2"), "{msg}");
        assert!(msg.contains("--nccl-lib"), "{msg}");
    }
}
