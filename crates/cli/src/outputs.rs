//! The one rule for every file a command writes (`run --output`, `run -J`,
//! `gen -o`, `report -o`, `check --json`), checked before any work:
//!
//! - an input of the command is never overwritten, `--force` or not;
//! - an existing regular file is refused unless `--force` is given;
//! - devices and pipes (`/dev/stdout`, `/dev/null`) are written as they are;
//! - a new file's folder must exist and be writable.

use crate::exit::Failure;
use std::path::Path;

/// Checks that `flag`'s `path` may be written; `inputs` are the files the
/// command reads. Creates nothing that stays behind.
pub fn claim(flag: &str, path: &Path, force: bool, inputs: &[&Path]) -> Result<(), Failure> {
    let shown = path.display();
    if let Ok(out) = path.canonicalize() {
        if inputs
            .iter()
            .filter_map(|i| i.canonicalize().ok())
            .any(|i| i == out)
        {
            return Err(Failure::usage(format!(
                "{flag} {shown} is also an input of this command: collbench never overwrites an input; choose another file"
            )));
        }
    }
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => {
            if !force {
                return Err(Failure::usage(format!(
                    "{flag} {shown} already exists: choose a new name, or add --force to replace it"
                )));
            }
            std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .map(drop)
                .map_err(|e| unwritable(flag, path, e))
        }
        Ok(meta) if meta.is_dir() => Err(Failure::usage(format!(
            "{flag} {shown} is a folder: name a file inside it"
        ))),
        Ok(_) => Ok(()),
        Err(_) => {
            // Probe the folder with a file of this process's own, so other
            // ranks checking the same path never see it appear.
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let probe = path.with_file_name(format!(".{name}.probe-{}", std::process::id()));
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&probe)
                .map_err(|e| unwritable(flag, path, e))?;
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
    }
}

/// Two output flags naming the same file would overwrite each other.
pub fn distinct(a: (&str, &Path), b: (&str, &Path)) -> Result<(), Failure> {
    let same =
        a.1 == b.1 || matches!((a.1.canonicalize(), b.1.canonicalize()), (Ok(x), Ok(y)) if x == y);
    if same {
        return Err(Failure::usage(format!(
            "{} and {} both name {}: give each its own file",
            a.0,
            b.0,
            a.1.display()
        )));
    }
    Ok(())
}

fn unwritable(flag: &str, path: &Path, e: std::io::Error) -> Failure {
    Failure::usage(format!(
        "cannot write {flag} {}: {}; choose a writable path",
        path.display(),
        io_reason(&e)
    ))
}

/// An I/O error's reason without Rust's " (os error N)" suffix.
pub fn io_reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}
