//! What did not fit in memory, as facts. The backends say what was asked
//! and what was there; their words name no flag, because `run`, `check`
//! and `tune` set sizes and ranks in different ways. The command that
//! set them (`run`: `-e`, `-u`, `--ranks`) names its own flags in the
//! fix.

use crate::memory::gib;
use collbench_core::size::format_size;
use collbench_core::Collective;

/// Why a case did not fit in memory: [`crate::BackendError::OutOfMemory`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Shortfall {
    /// The allocator refused one rank's host buffer.
    #[error("cannot allocate {bytes} bytes for a {buffer} buffer: run a smaller largest size or fewer ranks")]
    HostBuffer {
        /// Bytes asked for.
        bytes: u64,
        /// Which of the rank's buffers (send, receive, scratch).
        buffer: &'static str,
    },
    /// The sweep's largest case needs more host memory, over all the
    /// process's ranks, than it may still take.
    #[error(
        "{op} at {} needs {} of host memory with {ranks} ranks; {} is available: {}",
        format_size(*size), gib(*need), gib(*available), fits_words(*fits)
    )]
    HostSweep {
        /// The collective.
        op: Collective,
        /// The sweep's largest size, bytes.
        size: u64,
        /// Host memory the largest case needs, bytes.
        need: u64,
        /// Host memory this process may still take, bytes.
        available: u64,
        /// The process's ranks.
        ranks: usize,
        /// The largest power of two under `size` whose sweep fits, if any.
        fits: Option<u64>,
    },
    /// The case would fit aligned: the misalignment added to every
    /// buffer is what does not.
    #[error(
        "{op} at {} misaligned by {unalign} elements needs {} of host memory with {ranks} ranks, more than is free: the misalignment is added to every buffer, so misalign by fewer elements (e.g. 1)",
        format_size(*size), gib(*need)
    )]
    HostUnalign {
        /// The collective.
        op: Collective,
        /// The sweep's largest size, bytes.
        size: u64,
        /// Host memory the largest misaligned case needs, bytes.
        need: u64,
        /// The process's ranks.
        ranks: usize,
        /// Elements every buffer is misaligned by.
        unalign: u64,
    },
    /// The operating system refused a rank's thread.
    #[error("cannot start rank thread {rank} of {ranks}: {cause}: run fewer ranks")]
    RankThread {
        /// The rank whose thread did not start.
        rank: usize,
        /// Ranks asked for.
        ranks: usize,
        /// The system's words.
        cause: String,
    },
    /// The GPU refused a buffer.
    #[error(
        "{cause} for {bytes} bytes on GPU {ordinal} ({free} of {total} bytes free): the largest size that fits is about {} bytes",
        free / 2
    )]
    Gpu {
        /// The driver's words.
        cause: String,
        /// Bytes asked for.
        bytes: usize,
        /// The GPU's CUDA ordinal.
        ordinal: usize,
        /// Free GPU memory, bytes, when it failed.
        free: usize,
        /// The GPU's memory, bytes.
        total: usize,
    },
}

fn fits_words(fits: Option<u64>) -> String {
    match fits {
        Some(s) => format!("run sizes up to {} or fewer ranks", format_size(s)),
        None => "run fewer ranks".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library's words name the problem and a fix, and no flag.
    #[test]
    fn every_shortfall_names_a_fix_and_no_flag() {
        let cases = [
            Shortfall::HostBuffer {
                bytes: 1 << 40,
                buffer: "send",
            },
            Shortfall::HostSweep {
                op: Collective::AllReduce,
                size: 1 << 28,
                need: 1 << 31,
                available: 1 << 27,
                ranks: 2,
                fits: Some(1 << 24),
            },
            Shortfall::HostSweep {
                op: Collective::AllReduce,
                size: 1 << 28,
                need: 1 << 31,
                available: 1,
                ranks: 2,
                fits: None,
            },
            Shortfall::HostUnalign {
                op: Collective::AllReduce,
                size: 8,
                need: 1 << 40,
                ranks: 8,
                unalign: 4_000_000_000,
            },
            Shortfall::RankThread {
                rank: 3,
                ranks: 4,
                cause: "Resource temporarily unavailable".into(),
            },
            Shortfall::Gpu {
                cause: "out of memory".into(),
                bytes: 1 << 30,
                ordinal: 1,
                free: 600,
                total: 1000,
            },
        ];
        for s in cases {
            let line = s.to_string();
            assert!(!line.contains(" -") && !line.contains('\n'), "{line}");
            assert!(line.contains(':'), "no fix: {line}");
        }
    }

    #[test]
    fn the_sweep_names_a_size_that_fits() {
        let s = Shortfall::HostSweep {
            op: Collective::AllReduce,
            size: 256 << 20,
            need: 1_932_735_283,
            available: 107_374_182,
            ranks: 2,
            fits: Some(16 << 20),
        };
        assert_eq!(
            s.to_string(),
            "all_reduce at 256M needs 1.8 GiB of host memory with 2 ranks; 0.1 GiB is available: run sizes up to 16M or fewer ranks"
        );
    }
}
