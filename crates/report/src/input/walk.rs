//! Which files the inputs of `report` and `compare` name: each file named,
//! and every regular file under each folder named, each read once.
//!
//! A folder holding `ln -s . self` was read 41 times (until the path grew
//! too long), and a FIFO in a folder would have been waited on forever.
//! Now a folder reached again through a link is left out, a file reached
//! twice (a hard link, a symlink, a folder named twice) is read once, and
//! what is not a regular file inside a folder (FIFO, socket, device) is
//! skipped, saying so. A path named directly is read as it is, so
//! `/dev/stdin` and a FIFO work.

use crate::parse::FileError;
use std::collections::HashSet;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A file's identity: its device and inode. Two paths with the same
/// identity are one file (a hard link or a symlink to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    /// The identity of what `path` names (symlinks followed).
    pub fn of(path: &Path) -> Option<FileId> {
        std::fs::metadata(path).ok().map(|m| FileId::from(&m))
    }
}

impl From<&std::fs::Metadata> for FileId {
    fn from(m: &std::fs::Metadata) -> FileId {
        FileId {
            dev: m.dev(),
            ino: m.ino(),
        }
    }
}

/// One file to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    pub path: PathBuf,
    /// Found in a folder (a file there that is not a log is skipped; a
    /// file named directly must be one).
    pub in_folder: bool,
    /// Its identity; `None` when it cannot be read (the read says why).
    pub id: Option<FileId>,
    /// Its size on disk (0 for a FIFO, a device or `/dev/stdin`, which
    /// only the per-file limits bound).
    pub bytes: u64,
}

/// The files the inputs name, in order (named files as given, a folder's
/// files sorted by path), each once, and what was left out.
#[derive(Debug, Clone, Default)]
pub struct InputSet {
    pub files: Vec<InputFile>,
    /// One line per entry of a folder left out: `PATH: why`.
    pub skipped: Vec<String>,
    /// Paths that lead to a file or folder already in the set (read once).
    pub repeated: Vec<PathBuf>,
}

impl InputSet {
    /// Walks `paths`: a folder contributes every regular file under it
    /// (symlinks followed, never into a folder already walked); a path
    /// that is not a folder is a file to read.
    pub fn walk(paths: &[PathBuf]) -> Result<InputSet, FileError> {
        let mut walk = Walk::default();
        for path in paths {
            match std::fs::metadata(path) {
                Ok(m) if m.is_dir() => walk.folder(path, &m)?,
                Ok(m) => walk.file(path, &m, false),
                // The read names the problem (no such file, no access).
                Err(_) => walk.set.files.push(InputFile {
                    path: path.clone(),
                    in_folder: false,
                    id: None,
                    bytes: 0,
                }),
            }
        }
        Ok(walk.set)
    }

    /// The (device, inode) of every input file (named, or found in a
    /// folder), sorted, for the check that no output overwrites an input:
    /// a hard link to a file inside an input folder is that input.
    pub fn identities(&self) -> Vec<FileId> {
        let mut ids: Vec<FileId> = self.files.iter().filter_map(|f| f.id).collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// The state of one walk: what was seen, by identity.
#[derive(Default)]
struct Walk {
    set: InputSet,
    seen: HashSet<FileId>,
}

impl Walk {
    fn file(&mut self, path: &Path, meta: &std::fs::Metadata, in_folder: bool) {
        let id = FileId::from(meta);
        if !self.seen.insert(id) {
            self.set.repeated.push(path.to_path_buf());
            return;
        }
        self.set.files.push(InputFile {
            path: path.to_path_buf(),
            in_folder,
            id: Some(id),
            bytes: if meta.is_file() { meta.len() } else { 0 },
        });
    }

    fn folder(&mut self, dir: &Path, meta: &std::fs::Metadata) -> Result<(), FileError> {
        if !self.seen.insert(FileId::from(meta)) {
            self.set.repeated.push(dir.to_path_buf());
            return Ok(());
        }
        let io = |source| FileError::Io {
            path: dir.display().to_string(),
            source,
        };
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(io)?;
        entries.sort();
        for p in entries {
            let shown = p.display().to_string();
            match std::fs::metadata(&p) {
                Ok(m) if m.is_dir() => self.folder(&p, &m)?,
                Ok(m) if m.is_file() => self.file(&p, &m, true),
                Ok(m) => self.set.skipped.push(format!(
                    "{shown}: not a regular file ({}): left out",
                    kind(&m.file_type())
                )),
                Err(e) => self
                    .set
                    .skipped
                    .push(format!("{shown}: cannot read: {}", io_text(&e))),
            }
        }
        Ok(())
    }
}

/// What a non-regular file is, in words.
fn kind(t: &std::fs::FileType) -> &'static str {
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "not a file"
    }
}

/// An I/O error without Rust's "(os error N)".
fn io_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn loops_links_and_fifos_are_read_once_or_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("a.txt"), "x").unwrap();
        std::fs::hard_link(d.join("a.txt"), d.join("b.txt")).unwrap();
        symlink(".", d.join("self")).unwrap();
        symlink("a.txt", d.join("c.txt")).unwrap();
        symlink("missing", d.join("dangling")).unwrap();
        let fifo = d.join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let set = InputSet::walk(&[d.to_path_buf(), d.join("a.txt")]).unwrap();
        let files: Vec<&Path> = set.files.iter().map(|f| f.path.as_path()).collect();
        assert_eq!(files, [d.join("a.txt")]);
        assert_eq!(set.repeated.len(), 4, "{:?}", set.repeated);
        assert_eq!(set.skipped.len(), 2, "{:?}", set.skipped);
        assert!(set.skipped[0].ends_with("dangling: cannot read: No such file or directory"));
        assert!(set.skipped[1].ends_with("fifo: not a regular file (a FIFO): left out"));
        assert_eq!(set.identities(), [FileId::of(&d.join("b.txt")).unwrap()]);
    }

    #[test]
    fn a_path_named_directly_is_read_as_it_is() {
        let set = InputSet::walk(&[PathBuf::from("/dev/null"), PathBuf::from("/no/such")]).unwrap();
        assert_eq!(set.files.len(), 2);
        assert!(set.files[0].id.is_some() && set.files[1].id.is_none());
        assert!(set.skipped.is_empty());
    }
}
