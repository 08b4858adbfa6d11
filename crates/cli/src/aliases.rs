//! `collbench install-aliases DIR`: nccl-tests binary names as symlinks.

use crate::exit::Failure;
use std::path::Path;

/// Creates `DIR/<op>_perf -> this binary` for every collective. A link
/// that already points here is made again; a link that points elsewhere
/// (a real nccl-tests build, say) is refused unless `force`, and any other
/// file is always refused. Every name is checked before the first link is
/// made, so a refusal leaves the folder as it was.
pub fn install(dir: &Path, force: bool) -> Result<(), Failure> {
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| Failure::usage(format!("cannot find this program's path: {e}")))?;
    std::fs::create_dir_all(dir).map_err(|e| {
        Failure::usage(format!(
            "cannot create {}: {e}; choose a writable folder",
            dir.display()
        ))
    })?;
    let links: Vec<_> = collbench_core::Collective::ALL
        .iter()
        .map(|c| dir.join(c.spec().perf_name))
        .collect();
    let mut replace = Vec::new();
    for link in &links {
        let Ok(meta) = std::fs::symlink_metadata(link) else {
            continue;
        };
        if !meta.file_type().is_symlink() {
            return Err(Failure::usage(format!(
                "{} exists and is not a symlink: remove it or pick another folder",
                link.display()
            )));
        }
        let here = link.canonicalize().is_ok_and(|t| t == exe);
        if !here && !force {
            let target = std::fs::read_link(link)
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "?".into());
            return Err(Failure::usage(format!(
                "{} already links to {target}, not to this collbench: add --force to replace it, or pick another folder",
                link.display()
            )));
        }
        replace.push(link);
    }
    for link in &links {
        if replace.contains(&link) {
            std::fs::remove_file(link).map_err(|e| {
                Failure::usage(format!(
                    "cannot replace {}: {}",
                    link.display(),
                    crate::outputs::io_reason(&e)
                ))
            })?;
        }
        std::os::unix::fs::symlink(&exe, link).map_err(|e| {
            Failure::usage(format!(
                "cannot create {}: {}",
                link.display(),
                crate::outputs::io_reason(&e)
            ))
        })?;
        crate::stdout::print(&format!("{} -> {}\n", link.display(), exe.display()))?;
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
