//! Topology files: a TOML description of a machine that is not here (the
//! same fields as a record's `topology`). Read with a size bound and
//! checked, so a mistake is one line naming the problem and the fix.

use collbench_core::Topology;
use std::io::Read;
use std::path::Path;

/// A topology file is a few dozen lines; anything far larger is a wrong
/// path (a log, a binary), refused before it is read whole.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// Why a topology file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read topology file {path}: {source} (check the path)")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("topology file {path} is over {MAX_FILE_BYTES} bytes: give a TOML topology description (see topologies/)")]
    TooBig { path: String },
    #[error("topology file {path} is not valid: {message} (see topologies/*.toml for the fields)")]
    Parse { path: String, message: String },
    #[error("topology file {path}: {problem}")]
    Invalid { path: String, problem: String },
    #[error("no topology file or built-in topology named {name}: give a TOML file's path, or one of {builtins}")]
    Unknown { name: String, builtins: String },
}

/// Reads and checks the topology file at `path`.
pub fn load(path: &Path) -> Result<Topology, FileError> {
    let shown = path.display().to_string();
    let read_err = |source| FileError::Read {
        path: shown.clone(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(read_err)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(FileError::TooBig { path: shown });
    }
    parse_named(&text, &shown)
}

/// [`parse`], its errors naming `name` (a file's path, a built-in's name).
pub fn parse_named(text: &str, name: &str) -> Result<Topology, FileError> {
    parse(text).map_err(|e| match e {
        FileError::Parse { message, .. } => FileError::Parse {
            path: name.to_string(),
            message,
        },
        FileError::Invalid { problem, .. } => FileError::Invalid {
            path: name.to_string(),
            problem,
        },
        other => other,
    })
}

/// Parses and checks topology TOML text.
pub fn parse(text: &str) -> Result<Topology, FileError> {
    let topo: Topology = toml::from_str(text).map_err(|e| {
        // toml's own rendering spans lines (a caret drawing): keep one line
        // that names the line.
        let line = e
            .span()
            .map(|s| format!("line {}: ", text[..s.start].lines().count().max(1)))
            .unwrap_or_default();
        FileError::Parse {
            path: String::new(),
            message: format!("{line}{}", e.message().replace('\n', " ")),
        }
    })?;
    check(&topo).map_err(|problem| FileError::Invalid {
        path: String::new(),
        problem,
    })?;
    Ok(topo)
}

/// Above zero and a number (NaN is not).
fn positive(x: f64) -> bool {
    x > 0.0
}

/// The values no machine has: zero hosts, zero GPUs, non-positive rates.
fn check(t: &Topology) -> Result<(), String> {
    if t.hosts == 0 {
        return Err("hosts = 0: set hosts to 1 or more".into());
    }
    if t.ranks_per_host == Some(0) {
        return Err("ranks_per_host = 0: set it to 1 or more, or leave it out".into());
    }
    if t.concurrent_comms == Some(0) {
        return Err("concurrent_comms = 0: set it to 1 or more, or leave it out".into());
    }
    if let Some(g) = &t.gpu {
        if g.count == 0 {
            return Err("[gpu] count = 0: set the GPUs per host, or drop [gpu]".into());
        }
        if g.nvlink_link_gbps.is_some_and(|r| !positive(r)) {
            return Err(
                "[gpu] nvlink_link_gbps must be above 0 (GB/s per link and direction)".into(),
            );
        }
    }
    for n in &t.nics {
        if !positive(n.rate_gbit) || n.count == 0 {
            return Err("[[nics]] needs rate_gbit above 0 and count of 1 or more".into());
        }
    }
    if t.cpu
        .as_ref()
        .and_then(|c| c.mem_copy_gbps)
        .is_some_and(|r| !positive(r))
    {
        return Err("[cpu] mem_copy_gbps must be above 0".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_minimal_machine() {
        let t =
            parse("hosts = 2\n[gpu]\ncount = 8\n[[nics]]\nrate_gbit = 400\ncount = 8\n").unwrap();
        assert_eq!(t.host_net_gbps(), Some(400.0));
    }

    #[test]
    fn a_misspelt_field_is_named() {
        let e = parse("hosts = 1\nhostz = 2\n").unwrap_err().to_string();
        assert!(e.contains("hostz"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn zero_hosts_says_the_fix() {
        let e = parse("hosts = 0\n").unwrap_err().to_string();
        assert!(e.contains("set hosts to 1 or more"), "{e}");
    }

    #[test]
    fn an_oversized_file_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.toml");
        std::fs::write(&p, vec![b'#'; MAX_FILE_BYTES as usize + 10]).unwrap();
        assert!(matches!(load(&p), Err(FileError::TooBig { .. })));
    }
}
