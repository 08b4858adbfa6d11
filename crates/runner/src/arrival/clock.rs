//! Offsets between the processes' clocks: each process's [`now_ns`] put on
//! rank 0's, with a bound on the error.
//!
//! One round is a gather to rank 0 and a broadcast back over the control
//! plane. Rank 0 reads its clock between the two, when every process has
//! sent its part and none has had the answer: so that instant lies, on
//! each process's own clock, between the moment it sent and the moment
//! the answer came. That bounds the offset from both sides; the tightest
//! bounds over a few rounds (the least round trip wins) give the offset,
//! their half-width its error. Refreshed before every placement (clocks
//! of different hosts drift apart by a few microseconds a second).
//! Threads of one process share a clock: a world of one process has no
//! error at all.

use super::now_ns;
use collbench_core::{Bootstrap, PeerFailure};

/// Rounds per estimate: a few, so one slow round trip does not decide.
pub const ROUNDS: usize = 8;

/// How this process's clock reads on rank 0's: `rank0 = local + offset_ns`,
/// within `error_ns` either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClockOffset {
    pub offset_ns: i64,
    pub error_ns: u64,
}

impl ClockOffset {
    /// `local` (ns on this process's clock) on rank 0's clock, in us.
    pub fn to_rank0_us(&self, local: u64) -> f64 {
        (local as i64 + self.offset_ns) as f64 / 1e3
    }
}

/// Rank 0's reading `t0` lay between `sent` and `answered` on this
/// process's clock: the offsets that allows, `[lo, hi]`.
fn bounds(sent: u64, answered: u64, t0: u64) -> (i64, i64) {
    (t0 as i64 - answered as i64, t0 as i64 - sent as i64)
}

/// The offset from every round's bounds (`[lo, hi]`, ns): their
/// intersection's middle, or (bounds that do not meet, a clock stepped
/// meanwhile) the round with the least round trip. Public for the other
/// clock a process aligns: a GPU's timer read between two host readings
/// (`collbench_nccl::stamps`).
pub fn estimate(rounds: &[(i64, i64)]) -> ClockOffset {
    let lo = rounds.iter().map(|r| r.0).max().unwrap_or(0);
    let hi = rounds.iter().map(|r| r.1).min().unwrap_or(0);
    let (lo, hi) = if lo <= hi {
        (lo, hi)
    } else {
        rounds
            .iter()
            .copied()
            .min_by_key(|r| r.1 - r.0)
            .unwrap_or((0, 0))
    };
    ClockOffset {
        offset_ns: lo + (hi - lo) / 2,
        error_ns: ((hi - lo) as u64).div_ceil(2),
    }
}

/// This process's offset to rank 0's clock (every process of the job calls
/// it at the same step). Rank 0's own, and a world of one's, is exact.
pub fn sync(control: &dyn Bootstrap) -> Result<ClockOffset, PeerFailure> {
    if control.world_size() < 2 {
        return Ok(ClockOffset::default());
    }
    let root = control.rank() == 0;
    let mut rounds = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let sent = now_ns();
        control.gather(Vec::new())?;
        let mine = root.then(|| now_ns().to_le_bytes().to_vec());
        let t0 = control.broadcast(mine)?;
        let answered = now_ns();
        let t0 = <[u8; 8]>::try_from(t0.as_slice())
            .map(u64::from_le_bytes)
            .map_err(|_| {
                PeerFailure::new("clock sync: rank 0 sent no time (processes made different calls)")
            })?;
        rounds.push(bounds(sent, answered, t0));
    }
    Ok(if root {
        ClockOffset::default()
    } else {
        estimate(&rounds)
    })
}

/// The error bound between any two ranks of the job, from every process's
/// own bound: the two largest added (rank 0's is 0).
pub fn pair_error_us(errors_ns: &[u64]) -> f64 {
    let mut e = errors_ns.to_vec();
    e.sort_unstable_by(|a, b| b.cmp(a));
    (e.first().copied().unwrap_or(0) + e.get(1).copied().unwrap_or(0)) as f64 / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tightest_rounds_decide_the_offset_and_its_error() {
        // This clock is 1000 ns behind rank 0's; round trips of 400, 60
        // and 100 ns, rank 0's reading somewhere inside each.
        let truth = 1000i64;
        let round = |sent: i64, rtt: i64, at: i64| {
            bounds(sent as u64, (sent + rtt) as u64, (sent + at + truth) as u64)
        };
        let rounds = [
            round(5000, 400, 390),
            round(9000, 60, 10),
            round(12000, 100, 90),
        ];
        let o = estimate(&rounds);
        assert!((o.offset_ns - truth).abs() <= o.error_ns as i64, "{o:?}");
        assert!(o.error_ns <= 30, "the 60 ns round bounds it: {o:?}");
        assert_eq!(
            ClockOffset {
                offset_ns: -500,
                error_ns: 0
            }
            .to_rank0_us(2500),
            2.0
        );
    }

    #[test]
    fn bounds_that_do_not_meet_fall_back_to_the_shortest_round() {
        let o = estimate(&[(0, 100), (500, 520)]);
        assert_eq!(
            o,
            ClockOffset {
                offset_ns: 510,
                error_ns: 10
            }
        );
    }

    #[test]
    fn one_process_is_exact_and_pairs_add_the_two_largest_errors() {
        let o = sync(&collbench_core::SingleProcess).unwrap();
        assert_eq!(o, ClockOffset::default());
        assert_eq!(pair_error_us(&[0, 3000, 1000, 2000]), 5.0);
        assert_eq!(pair_error_us(&[0]), 0.0);
        assert_eq!(pair_error_us(&[]), 0.0);
    }
}
