//! The one rule for every file a command writes (`run --output`, `run -J`,
//! `gen -o`, `report -o`, `compare --html`, `check --json`), checked before
//! any work:
//!
//! - an input of the command is never overwritten, `--force` or not; "the
//!   same file" means the same device and inode, so a hard link or a
//!   symlink to an input is the input, and so is an existing file inside
//!   an input folder (it is read as one of its logs);
//! - an existing regular file is refused unless `--force` is given;
//! - devices and pipes (`/dev/stdout`, `/dev/null`) are written as they are;
//! - a new file's folder must exist and be writable.
//!
//! `check --prometheus` is replaced by a rename on every run, which
//! replaces whatever the name is: only a regular file (or no file) is
//! accepted there ([`claim_replaced`]).

use crate::exit::Failure;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Why an output path is refused. Each is one line naming the path and
/// what to do.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("{flag} {path} is also an input of this command: collbench never overwrites an input; choose another file")]
    Input { flag: String, path: String },
    #[error("{flag} {path} is the same file as the input {input} (a link to it): collbench never overwrites an input; choose another file")]
    LinkToInput {
        flag: String,
        path: String,
        input: String,
    },
    #[error("{flag} {path} lies in the input folder {folder}, so it is read as an input: collbench never overwrites an input; choose a file outside {folder}")]
    InInputFolder {
        flag: String,
        path: String,
        folder: String,
    },
    #[error("{flag} {path} already exists: choose a new name, or add --force to replace it")]
    Exists { flag: String, path: String },
    #[error("{flag} {path} is a folder: name a file inside it")]
    Folder { flag: String, path: String },
    #[error("{flag} {path} is {kind}: every run replaces the file by a rename, which would put a regular file in its place; name a regular file or a new one")]
    NotRegular {
        flag: String,
        path: String,
        kind: &'static str,
    },
    #[error("cannot write {flag} {path}: {reason}; choose a writable path")]
    Unwritable {
        flag: String,
        path: String,
        reason: String,
    },
    #[error("{a} and {b} both name {path}: give each its own file")]
    SameOutput { a: String, b: String, path: String },
}

impl From<Refusal> for Failure {
    fn from(r: Refusal) -> Failure {
        Failure::usage(r.to_string())
    }
}

/// Device and inode of what `path` names (symlinks followed).
fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether two paths name the same existing file or folder.
fn same_file(a: &Path, b: &Path) -> bool {
    matches!((identity(a), identity(b)), (Some(x), Some(y)) if x == y)
}

/// Refuses `path` when it is one of `inputs`, a link to one, or an
/// existing file inside an input folder.
fn not_an_input(flag: &str, path: &Path, inputs: &[&Path]) -> Result<(), Refusal> {
    let shown = path.display().to_string();
    for input in inputs {
        if same_file(path, input) {
            let same_name = path.canonicalize().ok() == input.canonicalize().ok();
            return Err(if same_name {
                Refusal::Input {
                    flag: flag.into(),
                    path: shown,
                }
            } else {
                Refusal::LinkToInput {
                    flag: flag.into(),
                    path: shown,
                    input: input.display().to_string(),
                }
            });
        }
        if input.is_dir() && path.exists() {
            let inside = match (path.canonicalize(), input.canonicalize()) {
                (Ok(p), Ok(d)) => p.starts_with(d),
                _ => false,
            };
            if inside {
                return Err(Refusal::InInputFolder {
                    flag: flag.into(),
                    path: shown,
                    folder: input.display().to_string(),
                });
            }
        }
    }
    Ok(())
}

/// Checks that `flag`'s `path` may be written; `inputs` are the files and
/// folders the command reads. Creates nothing that stays behind.
pub fn claim(flag: &str, path: &Path, force: bool, inputs: &[&Path]) -> Result<(), Failure> {
    not_an_input(flag, path, inputs)?;
    let shown = || path.display().to_string();
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => {
            if !force {
                return Err(Refusal::Exists {
                    flag: flag.into(),
                    path: shown(),
                }
                .into());
            }
            std::fs::OpenOptions::new()
                .append(true)
                .open(path)
                .map(drop)
                .map_err(|e| unwritable(flag, path, &e).into())
        }
        Ok(meta) if meta.is_dir() => Err(Refusal::Folder {
            flag: flag.into(),
            path: shown(),
        }
        .into()),
        Ok(_) => Ok(()),
        Err(_) => probe_folder(flag, path),
    }
}

/// `check --prometheus`: the file is replaced atomically on every run, so
/// an existing regular file needs no `--force`; anything else at that name
/// (a symlink, a FIFO, a device) would be replaced by a regular file and
/// is refused.
pub fn claim_replaced(flag: &str, path: &Path, inputs: &[&Path]) -> Result<(), Failure> {
    not_an_input(flag, path, inputs)?;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => probe_folder(flag, path),
        Ok(meta) if meta.is_dir() => Err(Refusal::Folder {
            flag: flag.into(),
            path: path.display().to_string(),
        }
        .into()),
        Ok(meta) => Err(Refusal::NotRegular {
            flag: flag.into(),
            path: path.display().to_string(),
            kind: kind_of(&meta.file_type()),
        }
        .into()),
        Err(_) => probe_folder(flag, path),
    }
}

/// What a non-regular file is, in words.
pub fn kind_of(t: &std::fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Probes `path`'s folder with a file of this process's own, so other
/// ranks checking the same path never see it appear.
fn probe_folder(flag: &str, path: &Path) -> Result<(), Failure> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let probe: PathBuf = path.with_file_name(format!(".{name}.probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| Failure::from(unwritable(flag, path, &e)))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Two output flags naming the same file would overwrite each other.
pub fn distinct(a: (&str, &Path), b: (&str, &Path)) -> Result<(), Failure> {
    let same = a.1 == b.1
        || same_file(a.1, b.1)
        || matches!((a.1.canonicalize(), b.1.canonicalize()), (Ok(x), Ok(y)) if x == y);
    if same {
        return Err(Refusal::SameOutput {
            a: a.0.into(),
            b: b.0.into(),
            path: a.1.display().to_string(),
        }
        .into());
    }
    Ok(())
}

fn unwritable(flag: &str, path: &Path, e: &std::io::Error) -> Refusal {
    Refusal::Unwritable {
        flag: flag.into(),
        path: path.display().to_string(),
        reason: io_reason(e),
    }
}

/// An I/O error's reason without Rust's " (os error N)" suffix.
pub fn io_reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new folder holding one file `name`.
    fn folder_with(name: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(name);
        std::fs::write(&file, "log\n").unwrap();
        (dir, file)
    }

    #[test]
    fn a_hard_link_to_an_input_is_the_input() {
        let (dir, input) = folder_with("in.txt");
        let link = dir.path().join("hard.md");
        std::fs::hard_link(&input, &link).unwrap();
        let e = claim("-o", &link, true, &[&input]).unwrap_err();
        assert!(
            e.message.contains("the same file as the input"),
            "{}",
            e.message
        );
        // A file inside an input folder is read as an input.
        let e = claim("-o", &input, true, &[dir.path()]).unwrap_err();
        assert!(
            e.message.contains("lies in the input folder"),
            "{}",
            e.message
        );
        // A new file there is not an input yet.
        claim("-o", &dir.path().join("new.md"), false, &[dir.path()]).unwrap();
    }

    #[test]
    fn a_replaced_file_must_be_a_regular_file() {
        let (dir, target) = folder_with("t");
        let link = dir.path().join("l.prom");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = claim_replaced("--prometheus", &link, &[]).unwrap_err();
        assert!(e.message.contains("a symbolic link"), "{}", e.message);
        let e = claim_replaced("--prometheus", Path::new("/dev/null"), &[]).unwrap_err();
        assert!(e.message.contains("a device"), "{}", e.message);
        claim_replaced("--prometheus", &target, &[]).unwrap();
        claim_replaced("--prometheus", &dir.path().join("new.prom"), &[]).unwrap();
    }
}
