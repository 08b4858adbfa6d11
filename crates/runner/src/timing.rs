//! How a case is timed: nccl-tests' timing flags as types (`-z`
//! [`Blocking`], `-G` [`Graph`]) and the [`Timing`] a plan carries and a
//! backend's timed loop reads. A flag that reaches the timed loop is a
//! field here (issue #52): the CLI fills it once, the runner hands it on
//! whole, the backends read it.

use serde::{Deserialize, Serialize};
use std::num::NonZeroU32;

/// nccl-tests' blocking mode (`-z`): what the timed loop does after
/// each iteration it launches. A plan carries it as nccl-tests' number,
/// so the plan sent to other ranks reads as the flag did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(into = "u32", try_from = "u32")]
pub enum Blocking {
    /// `-z 0`: iterations are queued back to back, waited for once.
    #[default]
    Off,
    /// `-z 1`: wait after each iteration. nccl-tests also meets at an MPI
    /// barrier inside the time; collbench only waits, since a barrier of
    /// its own costs a network round trip that nccl-tests' does not.
    Wait,
    /// `-z 2`: wait after each iteration, no barrier.
    WaitNoBarrier,
    /// `-z 3`: wait and meet at a barrier after each iteration, the
    /// barrier left out of the time; each iteration is timed on its own.
    BarrierEachIteration,
}

impl Blocking {
    /// The mode of nccl-tests' `-z N`, or `None` for a number it lacks.
    pub fn from_flag(n: u32) -> Option<Self> {
        Some(match n {
            0 => Self::Off,
            1 => Self::Wait,
            2 => Self::WaitNoBarrier,
            3 => Self::BarrierEachIteration,
            _ => return None,
        })
    }

    /// Whether the loop waits for each iteration before the next
    /// (nccl-tests' `blocking_collectives`).
    pub fn waits(self) -> bool {
        self != Self::Off
    }
}

impl From<Blocking> for u32 {
    fn from(b: Blocking) -> u32 {
        match b {
            Blocking::Off => 0,
            Blocking::Wait => 1,
            Blocking::WaitNoBarrier => 2,
            Blocking::BarrierEachIteration => 3,
        }
    }
}

impl TryFrom<u32> for Blocking {
    type Error = String;
    fn try_from(n: u32) -> Result<Self, String> {
        Self::from_flag(n).ok_or_else(|| format!("blocking mode {n} is not 0, 1, 2 or 3"))
    }
}

/// CUDA graph mode (`-G`): the timed iterations captured in a graph and
/// the graph launched this many times. Backends without graphs ignore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Graph {
    /// `-G 0`: no graph, every operation launched on its own.
    #[default]
    Off,
    /// `-G N`: captured once, launched N times.
    Launches(NonZeroU32),
}

impl Graph {
    /// The mode of nccl-tests' `-G N` (0 is off).
    pub fn from_flag(n: u32) -> Self {
        NonZeroU32::new(n).map_or(Self::Off, Self::Launches)
    }

    /// Launches of the graph; 0 when off (nccl-tests' header and `-J`).
    pub fn launches(self) -> u32 {
        match self {
            Self::Off => 0,
            Self::Launches(n) => n.get(),
        }
    }

    /// Whether the iterations are captured in a graph.
    pub fn is_on(self) -> bool {
        self != Self::Off
    }
}

/// How a case is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Warm-up iterations before the timed ones (`-w`).
    pub warmup_iters: u32,
    /// Timed iterations (`-n N`; under `-n auto` each repeat's count).
    pub iters: u32,
    /// Operations grouped per timed iteration (`-m`).
    pub agg_iters: u32,
    /// CUDA graph mode (`-G`).
    pub graph: Graph,
    /// Blocking mode (`-z`).
    pub blocking: Blocking,
    /// Largest size of the sweep: buffers rotate within it so that caches
    /// do not flatter small sizes.
    pub max_bytes: u64,
    /// Keep every iteration's time (`-I 1`): the user asked for the list,
    /// so memory grows with -n; otherwise a backend may summarise.
    pub keep_iter_times: bool,
    /// Whether to take per-iteration times where that costs the backend a
    /// second pass of the loop (NCCL below 1 GiB). True for `-n N`; for
    /// `-n auto`'s repeats only with `-I 1`, since each repeat's mean is
    /// already a sample and a second pass would double the time.
    pub iteration_pass: bool,
    /// Operation index the timed loop starts from, for the rotation of
    /// buffers within `max_bytes`: 0 for `-n N`; `-n auto`'s repeats go
    /// on where the last one stopped, so they touch memory as one loop of
    /// N would (repeats all starting at 0 would reuse one warm slot and
    /// flatter sizes that fit in a cache).
    pub first_op: u64,
    /// Take each rank's entry and end of every timed iteration
    /// ([`crate::arrival`]; `--arrival`, `check`'s battery).
    pub arrival: bool,
}

impl Default for Timing {
    /// nccl-tests' defaults: 1 warm-up, 20 timed iterations of 1
    /// operation, no graph, not blocking, 32 MiB.
    fn default() -> Timing {
        Timing {
            warmup_iters: 1,
            iters: 20,
            agg_iters: 1,
            graph: Graph::Off,
            blocking: Blocking::Off,
            max_bytes: 32 << 20,
            keep_iter_times: false,
            iteration_pass: true,
            first_op: 0,
            arrival: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Blocking, Graph};

    #[test]
    fn blocking_reads_and_writes_nccl_tests_numbers() {
        for n in 0..=3 {
            let mode = Blocking::from_flag(n).expect("0-3 are modes");
            assert_eq!(u32::from(mode), n);
            let json = serde_json::to_string(&mode).unwrap();
            assert_eq!(json, n.to_string(), "a plan carries the flag's number");
            assert_eq!(serde_json::from_str::<Blocking>(&json).unwrap(), mode);
        }
        for n in [4, u32::MAX] {
            assert_eq!(Blocking::from_flag(n), None);
            assert!(serde_json::from_str::<Blocking>(&n.to_string()).is_err());
        }
        assert!(!Blocking::Off.waits());
        assert!(Blocking::Wait.waits() && Blocking::BarrierEachIteration.waits());
        assert_eq!(Blocking::default(), Blocking::Off);
    }

    #[test]
    fn graph_reads_nccl_tests_numbers() {
        assert_eq!(Graph::from_flag(0), Graph::Off);
        assert!(!Graph::Off.is_on());
        for n in [1, 10, u32::MAX] {
            assert!(Graph::from_flag(n).is_on());
            assert_eq!(Graph::from_flag(n).launches(), n);
        }
        assert_eq!(Graph::Off.launches(), 0);
    }
}
