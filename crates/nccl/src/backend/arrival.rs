//! Arrival timing on GPUs (issue #53, `--arrival`): per timed iteration
//! and local rank, the host entry, and on the device a timestamp just
//! before the iteration's collectives and one just after, on the same
//! stream ([`crate::stamps`]); the GPU clocks put on the host's first, so
//! the runner aligns them with the other processes' like any host time.
//!
//! Like the per-iteration events (timing.rs), the stamps take a pass of
//! their own after the timed loop: a kernel between two collectives costs
//! the stream a launch gap (1-3 us), which the table's time must not
//! carry. The pass has the timed loop's shape (`-n`, `-m`, `-z`) and
//! reads the slots back once, after it has finished.

use super::comms::Comms;
use super::issue::Launcher;
use super::timing::{barrier, launch_iteration, Loop, Timer};
use crate::ffi::RedOpId;
use crate::stamps::{DeviceClock, Stamps};
use collbench_runner::arrival::{ArrivalSamples, RankSamples, MAX_ITERATIONS};
use collbench_runner::{BackendError, Blocking, CaseSpec};

/// Slots per GPU: a stamp before and one after each kept iteration
/// (64 KiB, loaded once whatever `-n` is).
const SLOTS: usize = 2 * MAX_ITERATIONS;

/// Each local GPU's kept iterations as (start, end) GPU timer readings,
/// turned into host-clock samples beside the host entries.
fn samples(
    entries: Vec<RankSamples>,
    slots: Vec<Vec<u64>>,
    clocks: &[DeviceClock],
) -> ArrivalSamples {
    let ranks = entries
        .into_iter()
        .zip(slots)
        .zip(clocks)
        .map(|((mut s, slots), clock)| {
            let kept = s.entry_ns.len().min(slots.len() / 2);
            s.entry_ns.truncate(kept);
            let host = |k: usize| clock.to_host_ns(slots[k]);
            s.start_ns = (0..kept).map(|i| host(2 * i)).collect();
            s.end_ns = (0..kept).map(|i| host(2 * i + 1)).collect();
            s
        })
        .collect();
    ArrivalSamples {
        ranks,
        device_clock_error_ns: clocks.iter().map(DeviceClock::error_ns).max().unwrap_or(0),
    }
}

impl Timer {
    /// Loads the stamp kernels on every GPU that lacks them.
    pub(super) fn ensure_stamps(&mut self, comms: &Comms) -> Result<(), BackendError> {
        for (g, stamps) in comms.gpus.iter().zip(&mut self.stamps) {
            if stamps.is_none() {
                g.dev.bind()?;
                *stamps = Some(Stamps::load(SLOTS)?);
            }
        }
        Ok(())
    }

    /// The late-entry hook: the hooked rank's stream is held for the
    /// hook's delay before the iteration (a host that sleeps cannot make
    /// a stream late by a known time: the host queues work iterations
    /// ahead of it). Nothing when no local rank is hooked.
    pub(super) fn hold_late(&self, comms: &Comms) -> Result<(), BackendError> {
        let Some(h) = comms.opts.late_entry else {
            return Ok(());
        };
        for (g, stamps) in comms.gpus.iter().zip(&self.stamps) {
            if g.global_rank != h.rank {
                continue;
            }
            let Some(stamps) = stamps.as_ref() else {
                return Err(BackendError::Library(
                    "--test-late-entry: the stamp kernels were not loaded before the loop".into(),
                ));
            };
            g.dev.bind()?;
            stamps.spin(h.delay.as_nanos() as u64, &g.stream)?;
        }
        Ok(())
    }

    /// Every GPU's timer on the host clock (streams idle).
    fn align_clocks(&self, comms: &Comms) -> Result<Vec<DeviceClock>, BackendError> {
        comms
            .gpus
            .iter()
            .zip(&self.stamps)
            .map(|(g, stamps)| {
                g.dev.bind()?;
                let stamps = stamps.as_ref().expect("ensure_stamps before");
                Ok(stamps.align(&g.stream)?)
            })
            .collect()
    }

    /// Stamps slot `slot` on every GPU (none past the slots kept).
    fn stamp_all(&self, comms: &Comms, slot: usize) -> Result<(), BackendError> {
        if slot >= SLOTS {
            return Ok(());
        }
        for (g, stamps) in comms.gpus.iter().zip(&self.stamps) {
            if comms.gpus.len() > 1 {
                g.dev.bind()?;
            }
            stamps.as_ref().expect("loaded").stamp(slot, &g.stream)?;
        }
        Ok(())
    }

    /// The arrival pass: the timed loop again with a stamp before and
    /// after each iteration on every GPU; the slots are read back once at
    /// the end. The GPU clocks are aligned just before (each row).
    pub(super) fn arrival_pass(
        &mut self,
        comms: &mut Comms,
        run: Launcher,
        case: &CaseSpec,
        lp: Loop,
        ops: &[RedOpId],
        blocking: Blocking,
    ) -> Result<ArrivalSamples, BackendError> {
        self.ensure_stamps(comms)?;
        comms.wait_all()?;
        let clocks = self.align_clocks(comms)?;
        let n = comms.gpus.len();
        let mut entries: Vec<RankSamples> = (0..n)
            .map(|_| RankSamples::with_capacity(lp.iters))
            .collect();
        for it in 0..lp.iters {
            self.hold_late(comms)?;
            entries.iter_mut().for_each(RankSamples::enter);
            self.stamp_all(comms, 2 * it as usize)?;
            comms.calling(lp.first_iteration + it)?;
            launch_iteration(comms, run, case, it, lp, ops)?;
            comms.at(lp.first_iteration + it + 1)?;
            self.stamp_all(comms, 2 * it as usize + 1)?;
            if blocking.waits() || blocking == Blocking::BarrierEachIteration {
                comms.wait_all()?;
            }
            if blocking == Blocking::BarrierEachIteration {
                barrier(comms, run.buffers)?;
            }
        }
        comms.wait_all()?;
        let kept = 2 * (lp.iters as usize).min(MAX_ITERATIONS);
        let slots = comms
            .gpus
            .iter()
            .zip(&self.stamps)
            .map(|(g, stamps)| {
                g.dev.bind()?;
                Ok(stamps.as_ref().expect("loaded").read(kept)?)
            })
            .collect::<Result<Vec<_>, BackendError>>()?;
        Ok(samples(entries, slots, &clocks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_runner::arrival::clock::ClockOffset;

    #[test]
    fn slots_pair_up_as_start_and_end_on_the_host_clock() {
        let entry = |v: Vec<u64>| RankSamples {
            entry_ns: v,
            ..RankSamples::default()
        };
        // GPU 1's timer reads 1e18 more than the host's, within 2 us.
        let clocks = [
            DeviceClock(ClockOffset::default()),
            DeviceClock(ClockOffset {
                offset_ns: -1_000_000_000_000_000_000,
                error_ns: 2_000,
            }),
        ];
        let base = 1_000_000_000_000_000_000;
        let s = samples(
            vec![entry(vec![10, 20, 30]), entry(vec![11, 21, 31])],
            vec![
                vec![15, 18, 25, 28, 35, 38],
                vec![base + 16, base + 19, base + 26, base + 29],
            ],
            &clocks,
        );
        assert_eq!(s.device_clock_error_ns, 2_000);
        assert_eq!(s.ranks[0].start_ns, [15, 25, 35]);
        assert_eq!(s.ranks[0].end_ns, [18, 28, 38]);
        // Fewer slots than entries: only the iterations stamped are kept.
        assert_eq!(s.ranks[1].entry_ns, [11, 21]);
        assert_eq!(s.ranks[1].start_ns, [16, 26]);
        assert_eq!(s.ranks[1].end_ns, [19, 29]);
    }
}
