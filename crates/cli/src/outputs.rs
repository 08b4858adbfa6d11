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

/// What makes two names one file: an existing file's device and inode,
/// or, for a file not made yet, its folder's canonical path and its name
/// (`zz.json` and `./zz.json`; a dangling symlink is keyed by its target).
#[derive(Debug, PartialEq, Eq)]
enum FileKey {
    Existing(u64, u64),
    New(PathBuf),
}

/// [`FileKey`] of `path`; `None` when its folder does not exist (the
/// write's own check then names the problem).
fn file_key(path: &Path) -> Option<FileKey> {
    let mut path = path.to_path_buf();
    // Symlinks to a file not made yet: writing follows them (40 is the
    // kernel's own limit).
    for _ in 0..40 {
        if let Some((dev, ino)) = identity(&path) {
            return Some(FileKey::Existing(dev, ino));
        }
        match std::fs::read_link(&path) {
            Ok(target) => path = path.parent().unwrap_or(Path::new(".")).join(target),
            Err(_) => break,
        }
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some(FileKey::New(
        folder.canonicalize().ok()?.join(path.file_name()?),
    ))
}

/// The most entries [`files_under`] looks at: an input folder is a folder
/// of logs, and a walk of `/` must not stall the refusal.
const MAX_WALK: usize = 100_000;

/// Regular files under `dir` with their identities: symlinks followed as
/// `report` follows them, each folder once (a `ln -s . self` loop ends).
fn files_under(dir: &Path) -> Vec<(PathBuf, (u64, u64))> {
    let mut seen_dirs = std::collections::HashSet::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut files = Vec::new();
    let mut looked = 0;
    while let Some(d) = stack.pop() {
        if !identity(&d).is_some_and(|id| seen_dirs.insert(id)) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten().take(MAX_WALK.saturating_sub(looked)) {
            looked += 1;
            let p = entry.path();
            match std::fs::metadata(&p) {
                Ok(m) if m.is_dir() => stack.push(p),
                Ok(m) if m.is_file() => files.push((p, (m.dev(), m.ino()))),
                _ => {}
            }
        }
    }
    files
}

/// Refuses `path` when it is one of `inputs`, a link to one, or an
/// existing file inside an input folder (or a link to one: a folder's
/// files are read as inputs).
fn not_an_input(flag: &str, path: &Path, inputs: &[&Path]) -> Result<(), Refusal> {
    let shown = path.display().to_string();
    let out_id = identity(path);
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
            let linked = files_under(input)
                .into_iter()
                .find(|(_, id)| Some(*id) == out_id);
            if let Some((file, _)) = linked {
                return Err(Refusal::LinkToInput {
                    flag: flag.into(),
                    path: shown,
                    input: file.display().to_string(),
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

/// Two output flags naming the same file would overwrite each other,
/// however the name is spelt (`zz.json` and `./zz.json`, a symlink, a
/// hard link), new file or existing.
pub fn distinct(a: (&str, &Path), b: (&str, &Path)) -> Result<(), Failure> {
    let same = a.1 == b.1 || matches!((file_key(a.1), file_key(b.1)), (Some(x), Some(y)) if x == y);
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
    fn one_file_however_spelt_is_one_output() {
        let (dir, existing) = folder_with("zz.json");
        let d = dir.path();
        let same = |a: &Path, b: &Path| distinct(("--output", a), ("-J", b)).is_err();
        // A new file, by a relative and a ./ spelling and through `..`.
        let new = d.join("new.json");
        assert!(same(&new, &d.join(".").join("new.json")));
        // An existing file and a hard link or symlink to it.
        std::fs::hard_link(&existing, d.join("hard.json")).unwrap();
        std::os::unix::fs::symlink(&existing, d.join("soft.json")).unwrap();
        assert!(same(&existing, &d.join("hard.json")));
        assert!(same(&existing, &d.join("soft.json")));
        // A dangling symlink writes its target.
        std::os::unix::fs::symlink(d.join("later.json"), d.join("dangling.json")).unwrap();
        assert!(same(&d.join("later.json"), &d.join("dangling.json")));
        assert!(!same(&new, &existing));
    }

    #[test]
    fn a_link_to_a_file_inside_an_input_folder_is_an_input() {
        let (dir, input) = folder_with("in.txt");
        std::os::unix::fs::symlink(dir.path(), dir.path().join("self")).unwrap();
        let out_dir = tempfile::tempdir().unwrap();
        let out = out_dir.path().join("out.md");
        std::fs::hard_link(&input, &out).unwrap();
        let e = claim("-o", &out, true, &[dir.path()]).unwrap_err();
        assert!(
            e.message.contains("the same file as the input"),
            "{}",
            e.message
        );
        assert!(e.message.contains("in.txt"), "{}", e.message);
        std::fs::remove_file(&out).unwrap();
        std::fs::write(&out, "x").unwrap();
        claim("-o", &out, true, &[dir.path()]).unwrap();
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
