//! Where each rank is in the run, cheaply enough to publish from the
//! edges of the timed loop: which case of the plan (the plan is the same
//! on every rank, so the case index names the collective and size), which
//! iteration, and which phase (issuing, waiting, checking).
//!
//! A [`Progress`] packs into one `u64` so a rank can publish it with one
//! atomic store and the control plane can carry it in every heartbeat.
//! Rank 0 keeps every rank's latest word and how long it has stayed the
//! same ([`RankProgress`]); when a collective outlives its deadline, that
//! table is what names the ranks that are behind.

use std::time::Duration;

/// What a rank is doing inside one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Phase {
    /// Between cases (setup, result exchange, printing).
    Idle = 0,
    /// Issuing the iterations of a case to the library.
    Issue = 1,
    /// Waiting for the issued iterations to complete.
    Wait = 2,
    /// Checking the results.
    Check = 3,
    /// Inside the call of the iteration (entered, not returned).
    Call = 4,
}

impl Phase {
    fn from_bits(bits: u64) -> Option<Phase> {
        match bits {
            0 => Some(Phase::Idle),
            1 => Some(Phase::Issue),
            2 => Some(Phase::Wait),
            3 => Some(Phase::Check),
            4 => Some(Phase::Call),
            _ => None,
        }
    }

    /// The word a stuck-rank line uses for it.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Issue => "issue",
            Phase::Wait => "wait",
            Phase::Check => "check",
            Phase::Call => "call",
        }
    }
}

/// One rank's position: case `case` of the plan, iteration `iteration`
/// (warm-up iterations count too), in `phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Progress {
    /// Index of the case in the plan's order (the same on every rank).
    pub case: u32,
    /// Iteration within the case, counted from 0.
    pub iteration: u32,
    /// What the rank is doing.
    pub phase: Phase,
}

/// Bits of the packed word given to the case index (16M cases).
const CASE_BITS: u32 = 24;
/// Bits given to the phase.
const PHASE_BITS: u32 = 4;
/// The top bit marks a word as set, so that 0 means "nothing published".
const SET: u64 = 1 << 63;

impl Progress {
    /// The packed word: bit 63 set, then case (24 bits), phase (4 bits),
    /// iteration (32 bits). A case index beyond 24 bits saturates.
    pub fn pack(self) -> u64 {
        let case = u64::from(self.case).min((1 << CASE_BITS) - 1);
        SET | case << (PHASE_BITS + 32) | (self.phase as u64) << 32 | u64::from(self.iteration)
    }

    /// The progress in a packed word; `None` for 0 (nothing published
    /// yet) or a word this version cannot read.
    pub fn unpack(word: u64) -> Option<Progress> {
        if word & SET == 0 {
            return None;
        }
        let phase = Phase::from_bits((word >> 32) & ((1 << PHASE_BITS) - 1))?;
        Some(Progress {
            case: ((word >> (PHASE_BITS + 32)) & ((1 << CASE_BITS) - 1)) as u32,
            iteration: word as u32,
            phase,
        })
    }
}

/// One rank's last published progress as rank 0 sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankProgress {
    /// The rank.
    pub rank: usize,
    /// Its host, as it named itself.
    pub host: String,
    /// Its last published progress (`None`: nothing published yet).
    pub progress: Option<Progress>,
    /// How long that progress has stayed the same.
    pub unchanged_for: Duration,
    /// Whether its heartbeats still arrive: a stopped or cut-off process
    /// keeps its last word forever, so its word alone cannot tell it from
    /// a rank that waits.
    pub heard: Heard,
}

/// The shortest silence called [`Heard::Silent`], whatever the beat.
const SILENT_AFTER_AT_LEAST: Duration = Duration::from_secs(2);

/// How recently the control plane heard from a rank, counted in its
/// heartbeat periods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Heard {
    /// Within about a heartbeat period (and always this process itself).
    #[default]
    InTime,
    /// One or two beats late: no alarm yet, but no verdict should rest
    /// on its word until it is heard again or falls silent.
    Late,
    /// Nothing for this long, three heartbeat periods or more (and 2 s
    /// at least, so a thread the scheduler starved a moment is not
    /// blamed): the process is stopped (SIGSTOP, a debugger), hung whole,
    /// or cut off.
    Silent(Duration),
}

impl Heard {
    /// What a rank last heard `ago` is, for heartbeats every `beat`.
    pub fn after(ago: Duration, beat: Duration) -> Heard {
        if ago <= beat.mul_f64(1.5) {
            Heard::InTime
        } else if ago < (beat * 3).max(SILENT_AFTER_AT_LEAST) {
            Heard::Late
        } else {
            Heard::Silent(ago)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_and_zero_means_nothing() {
        for phase in [
            Phase::Idle,
            Phase::Issue,
            Phase::Wait,
            Phase::Check,
            Phase::Call,
        ] {
            let p = Progress {
                case: 4095,
                iteration: u32::MAX,
                phase,
            };
            assert_eq!(Progress::unpack(p.pack()), Some(p));
        }
        assert_eq!(Progress::unpack(0), None);
    }

    #[test]
    fn later_cases_and_iterations_pack_to_larger_words() {
        let at = |case, iteration| {
            Progress {
                case,
                iteration,
                phase: Phase::Issue,
            }
            .pack()
        };
        assert!(at(3, 0) > at(2, 900));
        assert!(at(2, 7) > at(2, 6));
    }

    #[test]
    fn a_rank_is_late_after_a_beat_and_a_half_and_silent_after_three() {
        let beat = Duration::from_secs(2);
        let s = Duration::from_secs;
        assert_eq!(Heard::after(s(3), beat), Heard::InTime);
        assert_eq!(Heard::after(Duration::from_millis(3001), beat), Heard::Late);
        assert_eq!(Heard::after(Duration::from_millis(5999), beat), Heard::Late);
        assert_eq!(Heard::after(s(6), beat), Heard::Silent(s(6)));
        // Fast beats: still 2 s before a rank is called silent.
        let fast = Duration::from_millis(250);
        assert_eq!(Heard::after(Duration::from_millis(1900), fast), Heard::Late);
        assert_eq!(Heard::after(s(2), fast), Heard::Silent(s(2)));
    }
}
