//! A bound on what one command reads in all, checked on the files' sizes
//! before any is read.
//!
//! Each file has its own limit (JSON 256 MiB, text 64 MiB: see
//! [`crate::parse::read`]), but nothing bounded a folder or a comparison
//! as a whole: two JSON records near the cap aborted at 4 GB. Reading
//! costs at most about 3 bytes of memory per byte of JSON
//! (bench/results/compare-scale.md), so [`TOTAL_BYTES`], two records at
//! the cap (one run a side), keeps a command near 1.5 GB whatever its
//! folders hold.

use super::walk::InputSet;
use crate::parse::FileError;
use collbench_core::read_limit::{bytes_in_words, JSON_BYTES};

/// 512 MiB: the most bytes of input one `report` or `compare` reads, all
/// files together: one JSON record at the cap on each side of a
/// comparison.
pub const TOTAL_BYTES: u64 = 2 * JSON_BYTES;

/// 524,288: the most result rows one `report` or `compare` reads, all
/// files together. Sizes alone do not bound a text log made only of rows:
/// a row of text is about 117 bytes and costs about 3 KB of memory once
/// read and compared (the 65,536-row log: 7.7 MB, 390 MB compared with
/// itself), so this keeps the rows to about 1.5 GB, as [`TOTAL_BYTES`]
/// does for JSON. Two 65,536-size sweeps of four ops fit.
pub const TOTAL_ROWS: usize = 1 << 19;

/// Hidden, for tests: a lower [`TOTAL_ROWS`] (a test cannot write half a
/// million rows quickly).
const TOTAL_ROWS_ENV: &str = "COLLBENCH_TEST_TOTAL_ROWS";

/// The rows read so far by one command, against [`TOTAL_ROWS`].
#[derive(Debug)]
pub struct Rows {
    count: usize,
    limit: usize,
}

impl Default for Rows {
    fn default() -> Rows {
        let limit = std::env::var(TOTAL_ROWS_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(TOTAL_ROWS);
        Rows { count: 0, limit }
    }
}

impl Rows {
    /// Adds the rows of `records` just read from `path`; past the limit,
    /// the refusal (the rows read so far are dropped by the caller).
    pub fn add(
        &mut self,
        path: &std::path::Path,
        records: &[collbench_core::Record],
        fix: &'static str,
    ) -> Result<(), FileError> {
        self.count += records.iter().map(|r| r.results.len()).sum::<usize>();
        if self.count <= self.limit {
            return Ok(());
        }
        Err(FileError::TooManyRows {
            path: path.display().to_string(),
            rows: self.count,
            limit: self.limit,
            fix,
        })
    }
}

/// How many of the largest files the refusal names.
const NAMED: usize = 3;

/// Refuses inputs whose files add up to more than [`TOTAL_BYTES`]; each
/// set comes with its role (`BASE`, `NEW`, or empty), and `fix` says what
/// to do instead. FIFOs and `/dev/stdin` count as 0 (their own limits
/// bound them).
pub fn check(sets: &[(&str, &InputSet)], fix: &'static str) -> Result<(), FileError> {
    let mut files: Vec<(u64, String)> = sets
        .iter()
        .flat_map(|(role, set)| {
            set.files.iter().map(move |f| {
                let name = f.path.display().to_string();
                let name = if role.is_empty() {
                    name
                } else {
                    format!("{role} {name}")
                };
                (f.bytes, name)
            })
        })
        .collect();
    let total: u64 = files.iter().map(|(b, _)| *b).sum();
    if total <= TOTAL_BYTES {
        return Ok(());
    }
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut largest: Vec<String> = files
        .iter()
        .take(NAMED)
        .map(|(b, n)| format!("{n} {}", size(*b)))
        .collect();
    if files.len() > NAMED {
        largest.push(format!("{} more", files.len() - NAMED));
    }
    Err(FileError::TooMuchInput {
        total: size(total),
        files: files.len(),
        limit: bytes_in_words(TOTAL_BYTES),
        largest: largest.join(", "),
        fix,
    })
}

/// A size for people: whole MiB where it is one, else one decimal.
fn size(n: u64) -> String {
    if n < 1 << 20 || n.is_multiple_of(1 << 20) {
        return bytes_in_words(n);
    }
    format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    #[test]
    fn rows_are_counted_across_files() {
        let mut rows = Rows { count: 0, limit: 3 };
        let mut r = collbench_core::Record::new("x");
        r.results = vec![Default::default(); 2];
        assert!(rows
            .add(Path::new("a.txt"), std::slice::from_ref(&r), "x")
            .is_ok());
        let e = rows
            .add(Path::new("b.txt"), &[r], "read fewer")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "b.txt: the inputs hold 4 result rows up to this file, more than the 3 collbench reads in one command: read fewer"
        );
    }

    #[test]
    fn sizes_are_summed_over_every_set_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
        // Sparse: the sizes count, nothing is written or read.
        for (p, len) in [(&a, 300u64 << 20), (&b, 200 << 20)] {
            std::fs::File::create(p).unwrap().set_len(len).unwrap();
        }
        let base = InputSet::walk(std::slice::from_ref(&a)).unwrap();
        let new = InputSet::walk(std::slice::from_ref(&b)).unwrap();
        assert!(check(&[("BASE", &base), ("NEW", &new)], "x").is_ok());
        std::fs::File::options()
            .write(true)
            .open(&b)
            .unwrap()
            .set_len(250 << 20)
            .unwrap();
        let new = InputSet::walk(std::slice::from_ref(&b)).unwrap();
        let e = check(&[("BASE", &base), ("NEW", &new)], "compare fewer runs").unwrap_err();
        let line = e.to_string();
        assert!(!line.contains('\n'), "{line}");
        assert!(
            line.starts_with(&format!(
                "the inputs add up to 550 MiB in 2 file(s), more than the 512 MiB collbench reads in one command (largest: BASE {} 300 MiB, NEW {} 250 MiB)",
                a.display(),
                b.display()
            )),
            "{line}"
        );
        assert!(line.ends_with(": compare fewer runs"), "{line}");
        // A folder counts every file in it.
        let folder = InputSet::walk(&[PathBuf::from(dir.path())]).unwrap();
        assert!(check(&[("", &folder)], "x").is_err());
    }
}
