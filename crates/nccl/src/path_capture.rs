//! NCCL's own account of the path it took, captured privately: its
//! `NCCL_DEBUG=INFO` lines for the INIT, NET and ENV subsystems go to a
//! file of collbench's (`NCCL_DEBUG_FILE`), not to the user's terminal, and
//! [`collbench_core::nccl_path::NcclPath`] reads them after the run.
//!
//! What the user asked NCCL to print is never changed:
//! - nothing set: collbench sets the three variables before NCCL's first
//!   call, so NCCL prints nothing where it printed nothing;
//! - the user's own `NCCL_DEBUG_FILE`: their file is read, as it is;
//! - the user's `NCCL_DEBUG` printing to the terminal: left alone, and the
//!   path is not known (the record says why).
//!
//! The variables are set once per process, before the first communicator,
//! the way the profiler plugin's are (NCCL reads them at its first log).

use collbench_core::nccl_path::NcclPath;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Marks the variables as collbench's, so the record's environment leaves
/// them out and a child process does not take them for the user's.
pub const MARK_ENV: &str = "COLLBENCH_NCCL_PATH_CAPTURE";

/// Bytes read from a capture file: NCCL's INIT/NET lines of a 1024-rank
/// job's process are well under this.
const MAX_BYTES: u64 = 64 << 20;

/// How this process learns NCCL's path.
#[derive(Debug)]
pub enum Capture {
    /// collbench's private folder (removed when the process ends).
    Private(tempfile::TempDir),
    /// The user's own NCCL_DEBUG_FILE pattern (`%h`, `%p` expanded).
    UserFile(String),
    /// Not captured, and why.
    Off(String),
}

static CAPTURE: OnceLock<Capture> = OnceLock::new();

/// What to do, from the environment's `NCCL_DEBUG`, `NCCL_DEBUG_FILE` and
/// the mark (a pure decision, for tests).
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Set the variables to a private folder.
    Private,
    /// Read the user's file pattern.
    UserFile(String),
    /// Leave everything alone.
    Off(String),
}

/// Decides how to capture, given the variables as set.
pub fn decide(debug: Option<&str>, file: Option<&str>, marked: bool) -> Decision {
    match (debug, file) {
        // Set by collbench in a parent (a launcher forwarding env): ours.
        _ if marked => Decision::Private,
        (_, Some(f)) if !f.is_empty() => Decision::UserFile(f.to_string()),
        (Some(level), _) if !level.is_empty() => Decision::Off(format!(
            "NCCL_DEBUG={level} prints to the terminal; set NCCL_DEBUG_FILE too for collbench to read NCCL's path"
        )),
        _ => Decision::Private,
    }
}

/// Sets NCCL's debug variables for a private capture (once per process;
/// later calls return the first decision).
pub fn install() -> &'static Capture {
    CAPTURE.get_or_init(|| {
        let var = |k: &str| std::env::var(k).ok();
        let decision = decide(
            var("NCCL_DEBUG").as_deref(),
            var("NCCL_DEBUG_FILE").as_deref(),
            var(MARK_ENV).is_some(),
        );
        match decision {
            Decision::UserFile(f) => Capture::UserFile(f),
            Decision::Off(why) => Capture::Off(why),
            Decision::Private => match tempfile::Builder::new().prefix("collbench-nccl-").tempdir()
            {
                Ok(dir) => {
                    let pattern = dir.path().join("nccl.%h.%p.log");
                    // Before NCCL's first call in this process: NCCL reads
                    // them once, at its first log line.
                    std::env::set_var("NCCL_DEBUG", "INFO");
                    std::env::set_var("NCCL_DEBUG_SUBSYS", "INIT,NET,ENV");
                    std::env::set_var("NCCL_DEBUG_FILE", &pattern);
                    std::env::set_var(MARK_ENV, "1");
                    Capture::Private(dir)
                }
                Err(e) => Capture::Off(format!(
                    "cannot make a private folder for NCCL's lines: {e}"
                )),
            },
        }
    })
}

/// The variables collbench set for its capture (left out of the record's
/// environment), when it set them.
pub fn own_variables() -> &'static [&'static str] {
    if std::env::var_os(MARK_ENV).is_some() {
        &[
            "NCCL_DEBUG",
            "NCCL_DEBUG_SUBSYS",
            "NCCL_DEBUG_FILE",
            MARK_ENV,
        ]
    } else {
        &[]
    }
}

/// NCCL's path as this process's capture tells it; `Err` says why it is
/// not known.
pub fn read() -> Result<NcclPath, String> {
    match CAPTURE.get() {
        None => Err("NCCL's lines were not captured".into()),
        Some(Capture::Off(why)) => Err(why.clone()),
        Some(Capture::Private(dir)) => read_files(&files_in(dir.path())),
        Some(Capture::UserFile(pattern)) => {
            let path = expand(pattern, &hostname(), std::process::id());
            read_files(&[PathBuf::from(path)])
        }
    }
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

fn read_files(files: &[PathBuf]) -> Result<NcclPath, String> {
    let mut text = String::new();
    for f in files {
        use std::io::Read;
        let mut bytes = Vec::new();
        // The head of a file past the bound still holds the init lines.
        if let Ok(file) = std::fs::File::open(f) {
            if file.take(MAX_BYTES).read_to_end(&mut bytes).is_ok() {
                text.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }
    NcclPath::from_text(&text).ok_or_else(|| "NCCL printed no INFO line".to_string())
}

/// NCCL's `%h` (host) and `%p` (pid) in a debug file pattern.
pub fn expand(pattern: &str, host: &str, pid: u32) -> String {
    pattern.replace("%h", host).replace("%p", &pid.to_string())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_never_changes_what_the_user_asked_for() {
        assert_eq!(decide(None, None, false), Decision::Private);
        assert_eq!(decide(Some(""), None, false), Decision::Private);
        assert_eq!(
            decide(Some("INFO"), Some("/tmp/n.%h.%p"), false),
            Decision::UserFile("/tmp/n.%h.%p".into())
        );
        assert!(
            matches!(decide(Some("WARN"), None, false), Decision::Off(w) if w.contains("NCCL_DEBUG_FILE"))
        );
        // A child of a capturing collbench keeps capturing privately.
        assert_eq!(
            decide(Some("INFO"), Some("/x/nccl.%h.%p.log"), true),
            Decision::Private
        );
    }

    #[test]
    fn patterns_expand_host_and_pid() {
        assert_eq!(
            expand("/d/nccl.%h.%p.log", "node1", 42),
            "/d/nccl.node1.42.log"
        );
    }

    #[test]
    fn captured_files_are_read_to_a_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("nccl.h.1.log"),
            "h:1:1 [0] NCCL INFO Using network Socket\nh:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n",
        )
        .unwrap();
        let p = read_files(&files_in(dir.path())).unwrap();
        assert_eq!(p.net.as_deref(), Some("Socket"));
        assert!(read_files(&[]).is_err());
    }
}
