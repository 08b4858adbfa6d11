//! The pair tests after the battery: host pairs between the hosts of a
//! job of several processes, else pairwise sendrecv between the ranks of
//! one; rank 0 decides whether they run and at which size, and each ends
//! as one line of the table, or as a note when it could not run.

use super::cases::{iterations, Job, DEFAULT_SIZE_CPU};
use crate::battery::Iterations;
use crate::error::{self, CheckError};
use crate::host_tests::{self, HostReport, HostTestPlan, HostTestsSkipped};
use crate::hosts;
use crate::localize::{self, Localization};
use crate::verdict::{self, Fractions, Line, Metric, Status};
use crate::CheckOptions;
use collbench_core::size::format_size;
use collbench_core::{diag, Bootstrap};

/// Fewest warm-up and timed iterations of a host-pair test.
const HOST_WARMUP: u32 = 2;
const HOST_ITERS: u32 = 10;

/// Largest pair-test size: enough to reach a link's bandwidth.
const MAX_PAIR_SIZE: u64 = 256 << 20;

/// What the pair tests gave: nothing when they did not run, their line
/// and findings when they did, a note when they were skipped.
#[derive(Default)]
pub(super) struct PairTests {
    /// Their line of the table.
    pub line: Option<Line>,
    /// Why they were skipped.
    pub note: Option<String>,
    /// The pairwise tests between the ranks of one process.
    pub localization: Option<Localization>,
    /// The host tests of a job of several processes.
    pub hosts: Option<HostReport>,
}

/// Runs the pair tests when a multi-rank result is short, when asked, and
/// always without a baseline (then they are the check: self-consistency),
/// at the largest bandwidth size of `lines` (at most [`MAX_PAIR_SIZE`]).
/// Only the job's failure is an error: tests that cannot run are a note.
pub(super) fn pair_tests(
    job: &mut Job,
    args: &CheckOptions,
    no_baseline: bool,
    lines: &[Line],
    fractions: Fractions,
) -> Result<PairTests, CheckError> {
    let short = verdict::overall(lines) >= Status::Warn;
    let want = args.localize || no_baseline || short;
    let size = lines
        .iter()
        .filter(|l| l.metric == Metric::BusbwGbps)
        .map(|l| l.size_bytes)
        .max()
        .unwrap_or(DEFAULT_SIZE_CPU)
        .min(MAX_PAIR_SIZE);
    // Only rank 0 has the lines: every process takes its word for both,
    // or processes would test pairs at different sizes (or not at all).
    let (want, size) = agree_on_pairs(job.control, want, size)?;
    let processes = job.control.world_size();
    if !(want && (job.backend.world_size() >= 2 || processes > 1)) {
        return Ok(PairTests::default());
    }
    // Pairs need only their bandwidth: no explanation pass.
    let it = Iterations {
        explain: false,
        ..iterations(args, Metric::BusbwGbps)
    };
    if processes > 1 {
        host_pairs(job, size, it, fractions, args)
    } else {
        rank_pairs(job, size, it, args.pair_fraction)
    }
}

/// The host tests of a job of several processes: their line, or a note
/// when they were skipped; the job's failure ends the check as any
/// case's does.
fn host_pairs(
    job: &mut Job,
    size: u64,
    it: Iterations,
    fractions: Fractions,
    args: &CheckOptions,
) -> Result<PairTests, CheckError> {
    let root = job.root;
    if root {
        diag::line(&format!(
            "collbench check: host pairs (sendrecv and all_reduce) between the hosts of {} processes at {} ...",
            job.control.world_size(),
            format_size(size)
        ));
    }
    let mut progress = |s: &str| {
        if root {
            diag::line(&format!("collbench check:   {s}"))
        }
    };
    // The verdict weighs pairs against the job's own noise: a pair
    // test of three iterations (--quick) is itself noise (quiet
    // emulated hosts spread +-62% at 4 MiB, WARN in 1 of 5 runs).
    // Ten at least, after two warm-ups (a new communicator
    // connects on its first calls).
    let host_it = Iterations {
        warmup: it.warmup.max(HOST_WARMUP),
        timed: it.timed.max(HOST_ITERS),
        ..it
    };
    let plan = HostTestPlan {
        size_bytes: size,
        iters: host_it,
        fractions,
        groups: args.groups.clone(),
        hooks: args.hooks.clone(),
    };
    match host_tests::run_host_tests(
        &mut *job.backend,
        job.control,
        job.watchdog,
        &plan,
        &mut progress,
    ) {
        Ok(h) => Ok(PairTests {
            line: Some(hosts_line(&h, fractions)),
            hosts: Some(h),
            ..PairTests::default()
        }),
        Err(e) if job.control.failure().is_some() => Err(e),
        // Every process on one host: there is nothing between hosts to
        // judge, and the battery judged the host; a note.
        Err(e @ CheckError::HostTestsSkipped(HostTestsSkipped::OneHost { .. })) => Ok(PairTests {
            note: Some(format!("host tests skipped: {}", error::chain(&e))),
            ..PairTests::default()
        }),
        // Wanted and could not run: no host was judged against the others.
        Err(e) => Ok(PairTests {
            line: Some(not_judged("host pairs", size, &e)),
            ..PairTests::default()
        }),
    }
}

/// The pairwise sendrecv tests between the ranks of one process: their
/// line, or a note when they could not run.
fn rank_pairs(
    job: &Job,
    size: u64,
    it: Iterations,
    pair_fraction: f64,
) -> Result<PairTests, CheckError> {
    diag::line(&format!(
        "collbench check: pairwise sendrecv between {} ranks at {} ...",
        job.backend.world_size(),
        format_size(size)
    ));
    let mut progress = |s: &str| diag::line(&format!("collbench check:   {s}"));
    Ok(
        match localize::localize(
            &*job.backend,
            job.control,
            size,
            it,
            pair_fraction,
            &mut progress,
        ) {
            Ok(loc) => PairTests {
                line: Some(pairs_line(&loc)),
                localization: Some(loc),
                ..PairTests::default()
            },
            Err(e) => PairTests {
                line: Some(not_judged("sendrecv pairs", size, &e)),
                ..PairTests::default()
            },
        },
    )
}

/// The line of pair tests that were wanted and could not run: nothing
/// between ranks or hosts was judged, so the check is INCOMPLETE.
fn not_judged(op: &str, size_bytes: u64, e: &CheckError) -> Line {
    Line {
        op: op.into(),
        dtype: "float".into(),
        size_bytes,
        metric: Metric::SlowPairs,
        measured: None,
        expected: Some(0.0),
        ratio: None,
        wrong: 0,
        status: Status::Incomplete,
        note: Some(format!("not judged: {}", error::chain(e))),
        explain: None,
    }
}

/// The self-consistency line from the pairwise tests.
fn pairs_line(loc: &Localization) -> Line {
    let measured = loc.matrix.pairs().len();
    let slow = loc.slow_pairs.len();
    let mut who: Vec<String> = loc
        .culprits
        .iter()
        .map(|c| format!("slow rank r{}", c.rank))
        .collect();
    who.extend(
        loc.slow_links
            .iter()
            .map(|l| format!("slow link r{}<->r{}", l.a, l.b)),
    );
    Line {
        op: "sendrecv pairs".into(),
        dtype: "float".into(),
        size_bytes: loc.size_bytes,
        metric: Metric::SlowPairs,
        measured: Some(slow as f64),
        expected: Some(0.0),
        ratio: None,
        wrong: 0,
        // Without absolute figures, an outlier pair is a warning: the
        // operator decides whether a rank at 70% of its peers is broken.
        // Too noisy to judge is a warning too, naming nobody.
        status: if slow == 0 && loc.too_noisy.is_none() {
            Status::Pass
        } else {
            Status::Warn
        },
        note: if let Some(spread) = loc.too_noisy {
            Some(format!(
                "pairs spread by +-{:.0}%: too noisy to name a rank or link",
                spread * 100.0
            ))
        } else {
            (slow > 0).then(|| {
                format!(
                    "{slow} of {measured} pairs below {:.0}% of {:.2} GB/s: {}",
                    loc.fraction * 100.0,
                    loc.reference_gbps,
                    if who.is_empty() {
                        "no single culprit".into()
                    } else {
                        who.join(", ")
                    }
                )
            })
        },
        explain: None,
    }
}

/// Rank 0's decision whether to test pairs, and at which size, on every
/// process (a world of one keeps its own).
fn agree_on_pairs(
    control: &dyn Bootstrap,
    want: bool,
    size: u64,
) -> Result<(bool, u64), CheckError> {
    if control.world_size() == 1 {
        return Ok((want, size));
    }
    let mine = (control.rank() == 0).then(|| {
        let mut b = vec![want as u8];
        b.extend(size.to_le_bytes());
        b
    });
    let word = control.broadcast(mine)?;
    match word.as_slice() {
        [w, rest @ ..] if rest.len() == 8 => {
            let size = u64::from_le_bytes(rest.try_into().unwrap_or_default());
            Ok((*w != 0, size))
        }
        _ => Err(CheckError::Malformed(
            "malformed pair-test size from rank 0 (a different collbench version?)".into(),
        )),
    }
}

/// The line of the host tests: the hosts and links named, and the
/// verdict's status (a confirmed slow host below the FAIL fraction of the
/// job median fails; suspects and a job too noisy to judge warn). Pair
/// tests that failed make it INCOMPLETE, naming no host for them (they
/// are not judged), and so does a host that no test measured.
fn hosts_line(h: &HostReport, fractions: Fractions) -> Line {
    let mut notes: Vec<String> = h
        .verdict
        .findings
        .iter()
        .filter(|f| f.status(fractions) >= Status::Warn)
        .map(|f| hosts::finding_line(f, &h.hosts))
        .collect();
    let named = notes.len();
    let mut status = h.verdict.status;
    if !h.failures.is_empty() {
        status = status.max(Status::Incomplete);
        notes.push(format!(
            "{} pair test(s) failed (listed below, not judged)",
            h.failures.len()
        ));
    }
    let unjudged = h.unjudged_hosts();
    if !unjudged.is_empty() {
        status = status.max(Status::Incomplete);
        let names: Vec<&str> = unjudged.iter().map(|&x| h.hosts[x].name.as_str()).collect();
        notes.push(format!(
            "host(s) {} not judged: no pair test of theirs ran",
            names.join(", ")
        ));
    }
    Line {
        op: "host pairs".into(),
        dtype: "float".into(),
        size_bytes: h.size_bytes,
        metric: Metric::SlowPairs,
        measured: Some(named as f64),
        expected: Some(0.0),
        ratio: None,
        wrong: 0,
        status,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
        explain: None,
    }
}
