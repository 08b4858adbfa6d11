//! alltoallv traffic as nccl-tests 2.19.6 defines it: who sends how many
//! bytes to whom.
//!
//! Two sources, chosen by environment variables that the caller reads
//! (this crate does no I/O):
//! - the generated pattern (default): each rank sends `total_bytes` in all,
//!   split between peers by distance in rank space, blended with a uniform
//!   split by `NCCL_TESTS_ALLTOALLV_SPREAD` (0.0 uniform .. 1.0 fully
//!   distance-weighted, the default);
//! - a traffic matrix (`NCCL_TESTS_ALLTOALLV_MATRIX_FILE`, scaled by
//!   `NCCL_TESTS_ALLTOALLV_MATRIX_SCALE`): cell (i, j) is the bytes rank i
//!   sends to rank j.
//!
//! Every per-peer byte count is rounded down to a multiple of 16 bytes, so
//! it is a whole number of elements of every type. A rank's receive buffer
//! holds the segments from rank 0, 1, ... in order; the segment from `src`
//! is the part of `src`'s send buffer that follows what `src` sends to
//! lower ranks.

use crate::Counts;

/// Environment variable: the spread of the generated pattern.
pub const ENV_SPREAD: &str = "NCCL_TESTS_ALLTOALLV_SPREAD";
/// Environment variable: path of a traffic matrix file.
pub const ENV_MATRIX_FILE: &str = "NCCL_TESTS_ALLTOALLV_MATRIX_FILE";
/// Environment variable: scale applied to every matrix cell.
pub const ENV_MATRIX_SCALE: &str = "NCCL_TESTS_ALLTOALLV_MATRIX_SCALE";

/// Per-peer byte counts are multiples of this.
const ALIGN: u64 = 16;

/// Where alltoallv's per-peer byte counts come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Traffic {
    /// The distance-weighted pattern; `spread` is in 0.0..=1.0.
    Generated { spread: f64 },
    /// An explicit traffic matrix.
    Matrix(TrafficMatrix),
}

impl Default for Traffic {
    /// nccl-tests' default: the fully distance-weighted pattern.
    fn default() -> Traffic {
        Traffic::Generated { spread: 1.0 }
    }
}

/// A square matrix of bytes, row = sender, column = receiver, each cell
/// already scaled and rounded down to 16 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrafficMatrix {
    /// The file it came from, for messages.
    file: String,
    dim: usize,
    /// Row-major, `dim * dim` cells.
    bytes: Vec<u64>,
}

/// A problem with the traffic settings; each reads as one line naming the
/// problem and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrafficError {
    #[error("traffic matrix {file}: line {line}, value {column} ('{value}') is not a non-negative number of bytes: write whitespace-separated byte counts")]
    BadValue {
        file: String,
        line: usize,
        column: usize,
        value: String,
    },
    #[error("traffic matrix {file}: line {line} has {got} values but the first row has {expected}: every row needs the same number of values")]
    RaggedRow {
        file: String,
        line: usize,
        expected: usize,
        got: usize,
    },
    #[error("traffic matrix {file} is empty: write one row of byte counts per rank")]
    Empty { file: String },
    #[error("traffic matrix {file} is {rows}x{cols}: it must be square (one row and one column per rank)")]
    NotSquare {
        file: String,
        rows: usize,
        cols: usize,
    },
    #[error("traffic matrix {file} is {dim}x{dim} but the job has {world_size} ranks: give at least a {world_size}x{world_size} matrix or run fewer ranks")]
    TooSmall {
        file: String,
        dim: usize,
        world_size: usize,
    },
    /// nccl-tests' matrix mode runs one size: the matrix's.
    #[error("traffic matrix {file}: the smallest size ({min_bytes}) and the largest ({max_bytes}) must be equal in matrix mode (sizes come from the matrix)")]
    Sweep {
        file: String,
        min_bytes: u64,
        max_bytes: u64,
    },
    /// The size must hold the largest total one rank sends or receives.
    #[error("traffic matrix {file}: the largest size ({max_bytes}) must be at least {needed} bytes, the largest total a rank sends or receives")]
    MaxBytes {
        file: String,
        max_bytes: u64,
        needed: u64,
    },
    #[error("{var}='{value}' is not a number: set it to a number ({what})")]
    BadNumber {
        var: &'static str,
        value: String,
        what: &'static str,
    },
}

impl Traffic {
    /// The generated pattern with `NCCL_TESTS_ALLTOALLV_SPREAD`'s value
    /// (if set), clamped to 0.0..=1.0 as nccl-tests clamps it.
    pub fn generated(spread: Option<&str>) -> Result<Traffic, TrafficError> {
        let spread = match spread {
            None => 1.0,
            Some(s) => parse_number(ENV_SPREAD, s, "0.0 uniform .. 1.0 distance-weighted")?,
        };
        Ok(Traffic::Generated {
            spread: spread.clamp(0.0, 1.0),
        })
    }

    /// Bytes `src` sends to `dst` among `world_size` ranks, where each rank
    /// sends `total_bytes` in all (generated) or the matrix says so.
    pub fn peer_bytes(&self, src: usize, dst: usize, world_size: usize, total_bytes: u64) -> u64 {
        match self {
            Traffic::Generated { spread } => {
                generated_peer_bytes(*spread, src, dst, world_size, total_bytes)
            }
            Traffic::Matrix(m) => m.get(src, dst),
        }
    }

    /// Buffer counts for a requested size, as nccl-tests' alltoallv
    /// `GetCollByteCount`: `param_count` is the per-peer count of the
    /// uniform split (0 with a matrix), send and receive counts are the
    /// largest any rank sends and receives.
    pub fn counts(&self, size_bytes: u64, elt_size: usize, world_size: usize) -> Counts {
        let elt = elt_size as u64;
        let n = world_size.max(1);
        let param_count = match self {
            Traffic::Generated { .. } => {
                let align = (ALIGN / elt).max(1);
                (size_bytes / elt / n as u64) / align * align
            }
            Traffic::Matrix(_) => 0,
        };
        let peers = self.peer_counts(param_count, elt_size, n);
        Counts {
            send_count: (0..n).map(|r| peers.send_total(r)).max().unwrap_or(0),
            recv_count: (0..n).map(|r| peers.recv_total(r)).max().unwrap_or(0),
            param_count,
            send_inplace_offset: 0,
            recv_inplace_offset: 0,
        }
    }

    /// Every rank's per-peer element counts for a case whose parameter
    /// count is `param_count` (as [`Traffic::counts`] gives it).
    pub fn peer_counts(&self, param_count: u64, elt_size: usize, world_size: usize) -> PeerCounts {
        let n = world_size.max(1);
        let elt = elt_size as u64;
        let total_bytes = param_count * n as u64 * elt;
        let counts = (0..n * n)
            .map(|k| self.peer_bytes(k / n, k % n, n, total_bytes) / elt)
            .collect();
        PeerCounts::new(n, counts)
    }

    /// Checks the traffic against the job before anything runs: a matrix
    /// must cover every rank, and nccl-tests' matrix mode needs `-b` equal
    /// to `-e`, with `-e` at least the largest per-rank total.
    pub fn check_job(
        &self,
        world_size: usize,
        min_bytes: u64,
        max_bytes: u64,
    ) -> Result<(), TrafficError> {
        let Traffic::Matrix(m) = self else {
            return Ok(());
        };
        let file = m.file_name();
        if m.dim < world_size {
            return Err(TrafficError::TooSmall {
                file,
                dim: m.dim,
                world_size,
            });
        }
        if min_bytes != max_bytes {
            return Err(TrafficError::Sweep {
                file,
                min_bytes,
                max_bytes,
            });
        }
        let c = self.counts(max_bytes, 1, world_size);
        let needed = c.send_count.max(c.recv_count);
        if max_bytes < needed {
            return Err(TrafficError::MaxBytes {
                file,
                max_bytes,
                needed,
            });
        }
        Ok(())
    }
}

fn parse_number(var: &'static str, s: &str, what: &'static str) -> Result<f64, TrafficError> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| TrafficError::BadNumber {
            var,
            value: s.to_string(),
            what,
        })
}

/// nccl-tests' distance-weighted split, in the same floating-point steps
/// so that the byte counts agree with it exactly.
fn generated_peer_bytes(spread: f64, src: usize, dst: usize, n: usize, total_bytes: u64) -> u64 {
    if n <= 1 {
        return total_bytes & !(ALIGN - 1);
    }
    let distance = (dst + n - src) % n;
    let sum_distances = (n * (n - 1) / 2) as f64;
    let uniform = total_bytes as f64 / n as f64;
    let dist = distance as f64 * total_bytes as f64 / sum_distances;
    let bytes = (1.0 - spread) * uniform + spread * dist;
    (bytes as u64) & !(ALIGN - 1)
}

impl TrafficMatrix {
    /// Parses a matrix file's text: whitespace-separated byte counts, one
    /// row per line (blank lines are ignored), square. Each cell is
    /// multiplied by `scale` (`NCCL_TESTS_ALLTOALLV_MATRIX_SCALE`, default
    /// 1.0, negative taken as 0) and rounded down to 16 bytes. `file`
    /// names the file in errors.
    pub fn parse(
        file: &str,
        text: &str,
        scale: Option<&str>,
    ) -> Result<TrafficMatrix, TrafficError> {
        let scale = match scale {
            None => 1.0,
            Some(s) => parse_number(ENV_MATRIX_SCALE, s, "a factor for every cell, e.g. 2.0")?,
        }
        .max(0.0);
        let mut bytes = Vec::new();
        let mut cols = None;
        let mut rows = 0;
        for (line_no, line) in text.lines().enumerate() {
            let mut got = 0;
            for (col, word) in line.split_whitespace().enumerate() {
                let v = word
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0 && v * scale <= u64::MAX as f64)
                    .ok_or_else(|| TrafficError::BadValue {
                        file: file.to_string(),
                        line: line_no + 1,
                        column: col + 1,
                        value: word.to_string(),
                    })?;
                bytes.push(((v * scale) as u64) & !(ALIGN - 1));
                got += 1;
            }
            if got == 0 {
                continue;
            }
            match cols {
                None => cols = Some(got),
                Some(expected) if expected != got => {
                    return Err(TrafficError::RaggedRow {
                        file: file.to_string(),
                        line: line_no + 1,
                        expected,
                        got,
                    })
                }
                Some(_) => {}
            }
            rows += 1;
        }
        let Some(cols) = cols else {
            return Err(TrafficError::Empty {
                file: file.to_string(),
            });
        };
        if rows != cols {
            return Err(TrafficError::NotSquare {
                file: file.to_string(),
                rows,
                cols,
            });
        }
        Ok(TrafficMatrix {
            file: file.to_string(),
            dim: rows,
            bytes,
        })
    }

    /// Rows (= columns) of the matrix.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Bytes rank `src` sends to rank `dst`.
    pub fn get(&self, src: usize, dst: usize) -> u64 {
        self.bytes[src * self.dim + dst]
    }

    /// The file the matrix came from.
    pub fn file_name(&self) -> String {
        self.file.clone()
    }
}

/// Per-peer element counts of one alltoallv case, with the displacements
/// (prefix sums) that `MPI_Alltoallv` and grouped send/receive take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCounts {
    n: usize,
    /// `counts[src * n + dst]`: elements `src` sends to `dst`.
    counts: Vec<u64>,
    /// `send_displs[src * n + dst]`: where that segment starts in `src`'s
    /// send buffer.
    send_displs: Vec<u64>,
    /// `recv_displs[dst * n + src]`: where it lands in `dst`'s receive
    /// buffer.
    recv_displs: Vec<u64>,
}

impl PeerCounts {
    fn new(n: usize, counts: Vec<u64>) -> PeerCounts {
        let mut send_displs = vec![0; n * n];
        let mut recv_displs = vec![0; n * n];
        for a in 0..n {
            let (mut s, mut r) = (0, 0);
            for b in 0..n {
                send_displs[a * n + b] = s;
                s += counts[a * n + b];
                recv_displs[a * n + b] = r;
                r += counts[b * n + a];
            }
        }
        PeerCounts {
            n,
            counts,
            send_displs,
            recv_displs,
        }
    }

    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        self.n
    }

    /// Elements `src` sends to `dst`.
    pub fn count(&self, src: usize, dst: usize) -> u64 {
        self.counts[src * self.n + dst]
    }

    /// Offset (elements) in `src`'s send buffer of what it sends to `dst`.
    pub fn send_displ(&self, src: usize, dst: usize) -> u64 {
        self.send_displs[src * self.n + dst]
    }

    /// Offset (elements) in `dst`'s receive buffer of what `src` sends it.
    pub fn recv_displ(&self, dst: usize, src: usize) -> u64 {
        self.recv_displs[dst * self.n + src]
    }

    /// Elements `rank` sends in all.
    pub fn send_total(&self, rank: usize) -> u64 {
        (0..self.n).map(|d| self.count(rank, d)).sum()
    }

    /// Elements `rank` receives in all.
    pub fn recv_total(&self, rank: usize) -> u64 {
        (0..self.n).map(|s| self.count(s, rank)).sum()
    }

    /// Where element `j` of `rank`'s receive buffer comes from: `(src,
    /// index in src's send buffer)`, or `None` past what `rank` receives.
    pub fn source(&self, rank: usize, j: u64) -> Option<(usize, u64)> {
        (0..self.n).find_map(|src| {
            let start = self.recv_displ(rank, src);
            let len = self.count(src, rank);
            (j >= start && j < start + len).then(|| (src, self.send_displ(src, rank) + j - start))
        })
    }
}

#[cfg(test)]
#[path = "alltoallv_tests.rs"]
mod tests;
