//! collbench-core: the model every other crate shares.
//!
//! What a collective is ([`Collective`] and its [`CollectiveSpec`] table),
//! data types ([`DataType`]), reduction operators ([`ReduceOp`]), size sweeps
//! ([`size`]), the exact verification patterns ([`verify`]), time statistics
//! ([`stats`]), what the library reported it ran ([`explain`]), the result
//! model ([`record::Record`]) and its arrival figures ([`arrival`]) that printers, checkers and report writers
//! consume, NCCL's version code as text and back ([`nccl_version`]), the
//! pairwise bandwidth matrix ([`pairs::PairMatrix`]) that `check` writes
//! and `report` reads; the hardware under a run ([`topology`]) and a
//! row's ceiling as data ([`ceiling`]); where a rank is ([`progress`]) and the line that
//! names the ranks holding a collective up ([`stuck`]); writing results
//! to a given writer as a fallible step ([`stdout`]); reading a small input
//! file with a bound on its size ([`read_limit`]); lines for people
//! sent to the console the binary installs ([`diag`]); the bounds of
//! every number a user hands in ([`bounds`]) and the one TCP port type
//! ([`ports::Port`]); and
//! [`Bootstrap`], the seam through
//! which the runner, checks and backends talk to the job's other processes
//! (implemented by collbench-launch).
//!
//! Not for: I/O (but the one bounded file read every crate shares), backends, printing (it never touches stdout or stderr). This crate has no `unsafe` and no
//! heavy dependencies.
#![forbid(unsafe_code)]

pub mod adaptive;
pub mod alltoallv;
pub mod arrival;
pub mod auto_iters;
pub mod bootstrap;
pub mod bounds;
pub mod ceiling;
pub mod clock;
pub mod collective;
pub mod diag;
pub mod dtype;
pub mod element;
pub mod explain;
pub mod extension;
pub mod extension_list;
pub mod f8_tables;
pub mod nccl_only;
pub mod nccl_path;
pub mod nccl_version;
pub mod pairs;
pub mod ports;
pub mod progress;
pub mod read_limit;
pub mod record;
pub mod redop;
pub mod registration;
pub mod silent_setup;
pub mod size;
pub mod stats;
pub mod stdout;
pub mod stuck;
pub mod topology;
pub mod verify;
pub mod why;
pub mod why_rows;

pub use bootstrap::{Bootstrap, FailureKind, PeerFailure, SingleProcess};
pub use ceiling::{Algorithm, Bottleneck, Ceiling};
pub use collective::{Collective, CollectiveSpec, Counts};
pub use dtype::DataType;
pub use explain::{Explanation, KernelChoice};
pub use nccl_only::{NcclOnly, NcclOnlyFlags};
pub use progress::{Heard, Phase, Progress, RankProgress};
pub use record::{AutoPrecision, CaseResult, DeviceInfo, Placement, Record, RunSettings};
pub use redop::ReduceOp;
pub use registration::Registration;
pub use stats::TimeStats;
pub use topology::{CpuTopology, GpuLinkKind, GpuLinks, GpuTopology, NicGroup, NicKind, Topology};

/// Errors from parsing user-supplied names and sizes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    #[error("unknown {what} '{value}' (expected one of: {expected})")]
    Unknown {
        what: &'static str,
        value: String,
        expected: String,
    },
    #[error("invalid size '{0}': expected a number with an optional K, M or G suffix (binary, e.g. 8, 64K, 1M, 8G)")]
    Size(String),
}

impl ParseError {
    /// The error of a list that also takes `all` (a command line's `-d`,
    /// `-o`, ops): the expected names then begin with `all`. A file's
    /// single name (a baseline's `op`, `dtype`) does not take it, and its
    /// error does not offer it.
    pub fn or_all(self) -> ParseError {
        match self {
            ParseError::Unknown {
                what,
                value,
                expected,
            } => ParseError::Unknown {
                what,
                value,
                expected: format!("all, {expected}"),
            },
            other => other,
        }
    }
}
