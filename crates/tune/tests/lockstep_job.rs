//! The search of a `tune` job of several ranks ([`Lockstep`]) over the real
//! control plane (collbench-launch's TCP hub on loopback), one thread per
//! rank, each with its own noisy fake: at 2 and 4 ranks every rank ends
//! with the same report, the true winner wins, noise is never a gain in 50
//! seeds, a candidate that fails on one rank ends on every rank with that
//! rank's reason while the search goes on, and the budget holds.
//!
//! Processes (with child jobs, a killed peer, Ctrl-C) are the cli's
//! `tune_job` tests; these run many seeds cheaply because the ranks are
//! threads.

use collbench_core::Collective;
use collbench_launch::{Control, LaunchOptions, World};
use collbench_tune::fake::{FakeMeasurer, Truth};
use collbench_tune::lockstep::Lockstep;
use collbench_tune::{
    tune, CandidateStatus, Case, End, MeasureError, Measured, Measurer, Outcome, Setting,
    TuneConfig, TuneReport,
};
use std::sync::atomic::AtomicBool;
use std::thread;

mod common;

const MIB: u64 = 1 << 20;
/// Simulated seconds, in us.
const S: f64 = 1e6;

/// What one rank measures with: its seed and its rank.
type MakeMeasurer = fn(seed: u64, rank: usize) -> Box<dyn Measurer>;

/// Runs the search on `world_size` ranks joined on loopback; every rank's
/// report, by rank.
fn job(world_size: usize, seed: u64, cfg: &TuneConfig, make: MakeMeasurer) -> Vec<TuneReport> {
    jobs(world_size, seed..seed + 1, cfg, make).remove(0)
}

/// One search per seed, one after another on the same joined ranks (the
/// join is most of a short search's wall time); by seed, then by rank.
fn jobs(
    world_size: usize,
    seeds: std::ops::Range<u64>,
    cfg: &TuneConfig,
    make: MakeMeasurer,
) -> Vec<Vec<TuneReport>> {
    let port = World::free_loopback_port().unwrap();
    let token = format!("lockstep-{}-{port}", seeds.start);
    let ranks: Vec<_> = (0..world_size)
        .map(|rank| {
            let (cfg, seeds) = (cfg.clone(), seeds.clone());
            let world = World::on_loopback(rank, world_size, port, &token);
            thread::spawn(move || {
                let options = LaunchOptions {
                    timeout_s: 20,
                    ..LaunchOptions::default()
                };
                let control = Control::connect(&world, &options).expect("join");
                let search = |seed| {
                    let mut inner = make(seed, rank);
                    let (local_stop, agreed_stop) =
                        (AtomicBool::new(false), AtomicBool::new(false));
                    let mut lock = Lockstep::new(&mut *inner, &control, &local_stop, &agreed_stop);
                    let report = tune(&mut lock, &cfg, &agreed_stop, &mut |_| {});
                    assert!(lock.peer_failure().is_none(), "{:?}", lock.peer_failure());
                    report
                };
                seeds.map(search).collect::<Vec<_>>()
            })
        })
        .collect();
    let by_rank: Vec<Vec<TuneReport>> = ranks.into_iter().map(|h| h.join().unwrap()).collect();
    (0..seeds.end - seeds.start)
        .map(|i| by_rank.iter().map(|r| r[i as usize].clone()).collect())
        .collect()
}

/// Every rank took the same decisions: the same report but for the cost,
/// which each rank measured on its own clock (the fake's simulated one).
fn agreed(reports: &[TuneReport]) -> &TuneReport {
    let strip = |r: &TuneReport| {
        let mut r = r.clone();
        r.spent_us = 0.0;
        for b in &mut r.bands {
            b.spent_us = 0.0;
        }
        serde_json::to_value(&r).unwrap()
    };
    for (rank, r) in reports.iter().enumerate().skip(1) {
        assert_eq!(
            strip(r),
            strip(&reports[0]),
            "rank {rank} took other decisions"
        );
    }
    &reports[0]
}

/// A network like the emulated hosts': the socket knobs take 40% less
/// time than the default, everything else 5-35% more.
fn sockets_like() -> Truth {
    Box::new(|s: &Setting, c: &Case| {
        let base = 20.0 + c.bytes as f64 / 2e3; // ~2 GB/s
        let factor = if s.is_default() {
            1.0
        } else if s.channels == Some(4) {
            0.6
        } else {
            1.05 + (s.to_string().len() % 4) as f64 * 0.1
        };
        Some(base * factor)
    })
}

/// Rank `rank`'s fake: the same truth, its own noise; the last rank is
/// 10% slower everywhere (a collective runs at its slowest rank's pace).
fn winner_fake(seed: u64, rank: usize) -> Box<dyn Measurer> {
    let slow = if rank == 3 { 1.1 } else { 1.0 };
    let truth = sockets_like();
    Box::new(
        FakeMeasurer::new(
            seed * 16 + rank as u64,
            Box::new(move |s, c| truth(s, c).map(|t| t * slow)),
        )
        .noise(0.03),
    )
}

fn sizes_cfg(world_size: usize, budget_s: f64) -> TuneConfig {
    TuneConfig::new(
        vec![Collective::AllReduce, Collective::AllGather],
        vec![MIB, 128 * MIB],
        world_size,
        world_size,
        budget_s * S,
    )
}

#[test]
fn two_and_four_ranks_agree_and_pick_the_true_winner() {
    for world_size in [2, 4] {
        let cfg = sizes_cfg(world_size, 60.0);
        for (seed, reports) in jobs(world_size, 0..3, &cfg, winner_fake).iter().enumerate() {
            let r = agreed(reports);
            assert_eq!(r.end, End::Complete);
            assert_eq!(r.world_size, world_size);
            for b in &r.bands {
                let Outcome::Gain { setting, ratio, .. } = &b.outcome else {
                    panic!("{world_size} ranks, seed {seed}: no gain: {:?}", b.outcome);
                };
                assert_eq!(setting.channels, Some(4), "{world_size} ranks, seed {seed}");
                assert!((ratio.estimate - 0.6).abs() < 0.03, "{ratio:?}");
                assert!(ratio.hi < 1.0, "{ratio:?}");
            }
        }
    }
}

/// Every candidate takes the default's time; each rank has its own noise
/// (5%) and drift (1%).
fn flat_fake(seed: u64, rank: usize) -> Box<dyn Measurer> {
    Box::new(
        FakeMeasurer::new(
            10_000 + seed * 16 + rank as u64,
            Box::new(|_, c| Some(10.0 + c.bytes as f64 / 200e3)),
        )
        .noise(0.05)
        .drift(0.01),
    )
}

/// 50 seeds of [`flat_fake`] on `world_size` ranks: no band reports a gain.
fn noise_is_never_a_gain(world_size: usize) {
    let cfg = TuneConfig::new(
        vec![Collective::AllReduce],
        vec![64 * 1024, 64 * MIB],
        world_size,
        world_size,
        20.0 * S,
    );
    for (seed, reports) in jobs(world_size, 0..50, &cfg, flat_fake).iter().enumerate() {
        let what = format!("{world_size} ranks, seed {seed}");
        common::assert_no_gain(agreed(reports), &what);
    }
}

#[test]
fn noise_is_never_a_gain_in_50_seeds_at_2_ranks() {
    noise_is_never_a_gain(2);
}

#[test]
fn noise_is_never_a_gain_in_50_seeds_at_4_ranks() {
    noise_is_never_a_gain(4);
}

/// The winner's fake, but on rank 2 the winning candidate's measurement
/// fails after a few repeats, as a candidate's child process that died
/// there would.
struct FailsOnRank2 {
    inner: Box<dyn Measurer>,
    rank: usize,
    repeats_of_winner: u32,
}

impl Measurer for FailsOnRank2 {
    fn measure(&mut self, s: &Setting, c: &Case, iters: u32) -> Measured {
        if s.channels == Some(4) {
            self.repeats_of_winner += 1;
            if self.rank == 2 && self.repeats_of_winner > 3 {
                // As a child measurer says it: with the wall time it took.
                return Err(MeasureError::CandidateFailed {
                    reason: "its child process exited".into(),
                    cost_us: 20_000.0,
                });
            }
        }
        self.inner.measure(s, c, iters)
    }
}

fn fails_on_rank_2(seed: u64, rank: usize) -> Box<dyn Measurer> {
    Box::new(FailsOnRank2 {
        inner: winner_fake(seed, rank),
        rank,
        repeats_of_winner: 0,
    })
}

#[test]
fn a_candidate_failing_on_one_of_four_ranks_ends_on_all_and_the_search_goes_on() {
    let reports = job(4, 7, &sizes_cfg(4, 60.0), fails_on_rank_2);
    let r = agreed(&reports);
    assert_eq!(r.end, End::Complete);
    let mut ended = 0;
    for b in &r.bands {
        for c in &b.candidates {
            if c.setting.channels != Some(4) {
                continue;
            }
            let CandidateStatus::Failed { reason } = &c.status else {
                continue;
            };
            assert!(reason.contains("rank 2"), "{reason}");
            assert!(reason.contains("its child process exited"), "{reason}");
            ended += 1;
        }
        // The winner is gone; the search still decided the band.
        if let Some((s, _)) = b.gain() {
            assert_ne!(s.channels, Some(4));
        }
    }
    assert!(ended >= 1, "the failing candidate was never ended: {r:?}");
    // Every process charged the failure as rank 2 did: budgets that
    // drift apart would end up deciding apart.
    for (rank, other) in reports.iter().enumerate() {
        assert_eq!(other.spent_us, r.spent_us, "rank {rank}'s budget drifted");
    }
}

#[test]
fn the_budget_holds_at_four_ranks() {
    for budget_s in [0.5, 3.0] {
        let reports = job(4, 11, &sizes_cfg(4, budget_s), winner_fake);
        let r = agreed(&reports);
        for (rank, r) in reports.iter().enumerate() {
            // As in one process: over by at most one pair of the largest
            // case's repeats (~0.6 ms each at 128 MiB here, slowest rank).
            assert!(
                r.spent_us <= r.budget_us + 20_000.0,
                "rank {rank}, budget {budget_s} s: spent {} s",
                r.spent_us / S
            );
        }
        assert_eq!(r.bands.len(), 4, "every band gets its share");
    }
}
