//! Reading a small input file (a baseline, a tuner config, a traffic
//! matrix, a check JSON) with a bound on its size.
//!
//! `std::fs::read_to_string` grows with whatever it is given: `check
//! --baseline /dev/zero` and `run --tuner-config /dev/zero` ran until the
//! kernel stopped them, and 1 GiB of junk in a tuner config printed 7.1
//! million error lines. Every such file is read through a `Take` one byte
//! past its limit, so a file, a FIFO or a device that is too large is
//! refused after reading at most the limit.

use std::io::Read;
use std::path::Path;

/// 1 MiB: the limit of hand-written settings files (baselines, tuner
/// configs); the largest real one is a few KiB.
pub const SETTINGS_BYTES: u64 = 1 << 20;

/// 256 MiB: the limit of JSON inputs (collbench, nccl-tests `-J`, check
/// and Inspector JSON), read whole by serde.
pub const JSON_BYTES: u64 = 256 << 20;

/// Why a bounded read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadLimitError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file as named.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file holds more than the limit (or never ends: `/dev/zero`).
    #[error(
        "{path} is larger than {limit}, the most collbench reads as {what}: name the right file"
    )]
    TooLarge {
        /// The file as named.
        path: String,
        /// The limit in words (`1 MiB`).
        limit: String,
        /// What the file was read as (`a baseline`).
        what: String,
    },
    /// The file is not UTF-8 text (a binary file named by mistake).
    #[error("{path} is not text (not UTF-8), so it cannot be {what}: name the right file")]
    NotText {
        /// The file as named.
        path: String,
        /// What the file was read as.
        what: String,
    },
}

/// Reads `path` as UTF-8 text of at most `limit` bytes; `what` names the
/// file's role in the errors ("a baseline").
pub fn read_to_string(path: &Path, limit: u64, what: &str) -> Result<String, ReadLimitError> {
    let name = || path.display().to_string();
    let io = |source| ReadLimitError::Io {
        path: name(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadLimitError::TooLarge {
            path: name(),
            limit: bytes_in_words(limit),
            what: what.to_string(),
        });
    }
    String::from_utf8(bytes).map_err(|_| ReadLimitError::NotText {
        path: name(),
        what: what.to_string(),
    })
}

/// `1 MiB`, `256 MiB`, `512 KiB`, `100 bytes`.
pub fn bytes_in_words(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_without_end_is_refused_at_the_limit() {
        let e = read_to_string(Path::new("/dev/zero"), 4096, "a baseline").unwrap_err();
        assert!(matches!(e, ReadLimitError::TooLarge { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "/dev/zero is larger than 4 KiB, the most collbench reads as a baseline: name the right file"
        );
    }

    #[test]
    fn small_text_is_read_and_binary_is_refused() {
        let dir = std::env::temp_dir().join(format!("read_limit_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = dir.join("a.toml");
        std::fs::write(&text, "name = 'x'\n").unwrap();
        assert_eq!(read_to_string(&text, 100, "a").unwrap(), "name = 'x'\n");
        let bin = dir.join("b.bin");
        std::fs::write(&bin, [0xff, 0xfe, 0]).unwrap();
        assert!(matches!(
            read_to_string(&bin, 100, "a"),
            Err(ReadLimitError::NotText { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
