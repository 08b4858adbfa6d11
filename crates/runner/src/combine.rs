//! Rank 0's combination of every process's report of one placement into
//! the row's [`Placement`]: pure, so unit tests call it directly.

use crate::arrival::timelines::{row_arrival, ProcessArrivals};
use crate::arrival::ArrivalSamples;
use crate::backend::CaseSpec;
use crate::plan::Average;
use collbench_core::extension_list::extensions;
use collbench_core::stats::StreamingStats;
use collbench_core::{Explanation, Placement, TimeStats};
use serde::{Deserialize, Serialize};

/// What each process reports to rank 0 for one placement.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct RankReport {
    /// Seconds per operation, per local rank.
    pub rank_time_s: Vec<f64>,
    /// Seconds per operation spent issuing work, per local rank (`-C`).
    pub rank_cputime_s: Vec<f64>,
    /// Per-iteration microseconds (the slowest local rank).
    pub iter_times_us: Vec<f64>,
    /// The same summarised in fixed memory, where the backend does so.
    #[serde(default)]
    pub iter_stats: Option<StreamingStats>,
    /// Wrong elements over this process's ranks; `None` when unchecked.
    pub wrong: Option<u64>,
    /// The placement checks' shares over this process's ranks (their
    /// fields of a placement; the rest left default).
    #[serde(default)]
    pub checked: Placement,
    /// What the library ran on this process's ranks (`--explain`).
    #[serde(default)]
    pub explain: Option<Explanation>,
    /// What the backend took of arrivals, on this process's clock (never
    /// sent: the runner turns it into `arrival` first).
    #[serde(skip)]
    pub arrival_samples: Option<ArrivalSamples>,
    /// This process's ranks' timelines on rank 0's clock (`--arrival`).
    #[serde(default)]
    pub arrival: Option<ProcessArrivals>,
}

/// How the reports combine: the plan's settings that shape a row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Combine {
    /// How rank times combine (`-a`).
    pub average: Average,
    /// Show the issue time instead (`-C`).
    pub cputime: bool,
    /// Keep every iteration's time (`-I 1`).
    pub per_iter_timing: bool,
    /// Leading iterations the summary leaves out (`-K`).
    pub per_iter_skip: u32,
    /// Operations timed: iterations x aggregation.
    pub iterations: u64,
    /// Operations per timed iteration (`-m`).
    pub agg_iters: u64,
}

/// The row's placement from every process's report, in process order:
/// times combined as `-a` says, per iteration the slowest process,
/// wrong elements added, explanations merged, placement checks' shares
/// merged by their extensions.
// The row names every field but the placement extensions' (default, then
// merged): with no extension listed that update is needless.
#[allow(clippy::needless_update)]
pub(crate) fn combine(reports: Vec<RankReport>, case: &CaseSpec, how: &Combine) -> Placement {
    let mut times = Vec::new();
    let mut cputimes = Vec::new();
    let mut iter_us: Vec<f64> = Vec::new();
    let mut process_iter_us = Vec::new();
    let mut summarised: Option<StreamingStats> = None;
    let mut total_wrong: Option<u64> = None;
    let mut checked = Placement::default();
    let mut explains = Vec::new();
    let mut arrivals = Vec::new();
    for r in reports {
        arrivals.extend(r.arrival);
        times.extend(r.rank_time_s);
        cputimes.extend(r.rank_cputime_s);
        // Per iteration, the slowest process decides.
        if iter_us.len() < r.iter_times_us.len() {
            iter_us.resize(r.iter_times_us.len(), 0.0);
        }
        for (a, b) in iter_us.iter_mut().zip(&r.iter_times_us) {
            *a = a.max(*b);
        }
        process_iter_us.push(r.iter_times_us);
        // Summaries cannot be matched per iteration: pooled instead.
        if let Some(s) = &r.iter_stats {
            summarised.get_or_insert_with(StreamingStats::new).merge(s);
        }
        if let Some(w) = r.wrong {
            total_wrong = Some(total_wrong.unwrap_or(0) + w);
        }
        explains.extend(r.explain);
        merge_checks(&mut checked, &r.checked);
    }
    let time_s = how.average.combine(&times);
    let coll = case.collective;
    let elt = case.dtype.size_bytes();
    let algbw = coll.algbw_gbps(&case.counts, elt, case.world_size, time_s);
    let shown_s = if how.cputime && !cputimes.is_empty() {
        cputimes[0]
    } else {
        time_s
    };
    let per_iter = how.per_iter_timing;
    if !per_iter || process_iter_us.len() < 2 {
        process_iter_us.clear();
    }
    // -K: the summary leaves out leading iterations (never all of them).
    let skip = (how.per_iter_skip as usize).min(iter_us.len().saturating_sub(1));
    let mut row = Placement {
        time_us: shown_s * 1e6,
        algbw_gbps: algbw,
        busbw_gbps: algbw * coll.busbw_factor(case.world_size),
        wrong: total_wrong,
        iterations: how.iterations,
        // With the whole list kept (-I 1) the summary honours -K;
        // otherwise a backend's streaming summary stands for it.
        stats: match summarised {
            Some(s) if !per_iter || iter_us.is_empty() => s.summary(),
            _ => TimeStats::from_samples(&iter_us[skip..]),
        },
        rank_time_us: times.iter().map(|t| t * 1e6).collect(),
        explain: (!explains.is_empty()).then(|| Box::new(Explanation::merge(explains))),
        iter_times_us: if per_iter { iter_us } else { Vec::new() },
        process_iter_times_us: process_iter_us,
        // Set by the runner, which ran the series.
        auto: None,
        // Set by the CLI from the run's topology, after the rows, with
        // the causes of a low row.
        ceiling: None,
        why: Vec::new(),
        arrival: match arrivals.is_empty() {
            true => None,
            false => row_arrival(arrivals, case, how.agg_iters).map(Box::new),
        },
        ..Placement::default()
    };
    merge_checks(&mut row, &checked);
    row
}

/// The placement checks' shares in `from` added into `into` (each
/// extension merges its own field).
fn merge_checks(into: &mut Placement, from: &Placement) {
    for ext in extensions() {
        ext.merge(into, from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::{Collective, Counts, DataType, ReduceOp};

    /// all_reduce of 1 MiB of floats over 4 ranks.
    fn case() -> CaseSpec {
        let n = (1 << 20) / 4;
        CaseSpec {
            collective: Collective::AllReduce,
            dtype: DataType::Float,
            redop: ReduceOp::Sum,
            root: 0,
            counts: Counts {
                send_count: n,
                recv_count: n,
                param_count: n,
                send_inplace_offset: 0,
                recv_inplace_offset: 0,
            },
            in_place: false,
            world_size: 4,
        }
    }

    fn how(average: Average) -> Combine {
        Combine {
            average,
            cputime: false,
            per_iter_timing: true,
            per_iter_skip: 0,
            iterations: 20,
            agg_iters: 1,
        }
    }

    /// Two processes of two ranks each: (times, CPU times) of its ranks in
    /// seconds, its iterations' times, its wrong elements.
    fn reports() -> Vec<RankReport> {
        let process = |time: [f64; 2], cpu: [f64; 2], iters: [f64; 3], wrong| RankReport {
            rank_time_s: time.to_vec(),
            rank_cputime_s: cpu.to_vec(),
            iter_times_us: iters.to_vec(),
            wrong: Some(wrong),
            ..RankReport::default()
        };
        vec![
            process([100e-6, 110e-6], [5e-6, 6e-6], [90.0, 120.0, 95.0], 0),
            process([130e-6, 120e-6], [7e-6, 8e-6], [100.0, 110.0, 140.0], 3),
        ]
    }

    #[test]
    fn times_combine_as_minus_a_says_and_bandwidths_follow() {
        let p = combine(reports(), &case(), &how(Average::Max));
        assert!((p.time_us - 130.0).abs() < 1e-9, "{}", p.time_us);
        let algbw = (1u64 << 20) as f64 / 130e-6 / 1e9;
        assert!((p.algbw_gbps - algbw).abs() < 1e-9);
        assert!(
            (p.busbw_gbps - algbw * 1.5).abs() < 1e-9,
            "2(n-1)/n for 4 ranks"
        );
        let p = combine(reports(), &case(), &how(Average::Rank0));
        assert!((p.time_us - 100.0).abs() < 1e-9);
        assert_eq!(p.rank_time_us.len(), 4);
        assert_eq!(p.iterations, 20);
    }

    #[test]
    fn the_slowest_process_decides_each_iteration_and_wrong_adds_up() {
        let p = combine(reports(), &case(), &how(Average::Mean));
        assert_eq!(p.iter_times_us, [100.0, 120.0, 140.0]);
        assert_eq!(p.process_iter_times_us.len(), 2);
        assert_eq!(p.wrong, Some(3));
    }

    #[test]
    fn unchecked_rows_have_no_wrong_count_and_minus_c_shows_issue_time() {
        let mut r = reports();
        r.iter_mut().for_each(|r| r.wrong = None);
        let how = Combine {
            cputime: true,
            per_iter_timing: false,
            ..how(Average::Mean)
        };
        let p = combine(r, &case(), &how);
        assert_eq!(p.wrong, None);
        assert!((p.time_us - 5.0).abs() < 1e-9, "rank 0's issue time");
        assert!(p.iter_times_us.is_empty() && p.process_iter_times_us.is_empty());
    }
}
