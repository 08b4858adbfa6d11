//! `collbench install-aliases DIR`: nccl-tests binary names as symlinks.

use crate::exit::Failure;
use std::path::Path;

/// Creates `DIR/<op>_perf -> this binary` for every collective; existing
/// links are replaced, other files are left alone with an error.
pub fn install(dir: &Path) -> Result<(), Failure> {
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| Failure::usage(format!("cannot find this program's path: {e}")))?;
    std::fs::create_dir_all(dir).map_err(|e| {
        Failure::usage(format!(
            "cannot create {}: {e}; choose a writable folder",
            dir.display()
        ))
    })?;
    for c in collbench_core::Collective::ALL {
        let link = dir.join(c.spec().perf_name);
        if let Ok(meta) = std::fs::symlink_metadata(&link) {
            if !meta.file_type().is_symlink() {
                return Err(Failure::usage(format!(
                    "{} exists and is not a symlink: remove it or pick another folder",
                    link.display()
                )));
            }
            let _ = std::fs::remove_file(&link);
        }
        std::os::unix::fs::symlink(&exe, &link)
            .map_err(|e| Failure::usage(format!("cannot create {}: {e}", link.display())))?;
        collbench_core::stdout::print(&format!("{} -> {}\n", link.display(), exe.display()))?;
    }
    Ok(())
}

/// Called by a name that ends in `_perf` but names no collective (a copy or
/// link with a typo): one line naming the known names.
pub fn refuse_unknown_perf_name(prog: &str) -> Result<(), Failure> {
    if !prog.ends_with("_perf") {
        return Ok(());
    }
    let known: Vec<&str> = collbench_core::Collective::ALL
        .iter()
        .map(|c| c.spec().perf_name)
        .collect();
    Err(Failure::usage(format!(
        "'{prog}' is not a collective's program name: call this binary as one of {}, or as `collbench run OP`",
        known.join(", ")
    )))
}
