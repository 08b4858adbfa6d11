//! A process's arrival samples on rank 0's clock, as they travel to rank
//! 0 with the placement's report, and the row's figures from all of them.

use super::clock::{pair_error_us, ClockOffset};
use super::ArrivalSamples;
use crate::backend::CaseSpec;
use collbench_core::arrival::{analyze, Arrival, RankTimeline, Scale};
use serde::{Deserialize, Serialize};

/// One process's ranks' timelines (microseconds on rank 0's clock) and
/// the error bound of its clock's offset.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessArrivals {
    pub clock_error_ns: u64,
    pub ranks: Vec<RankTimeline>,
}

/// The host a straggler is named with: NCCL's notion of a host,
/// `NCCL_HOSTID` where set (how emulated hosts are told apart, and how
/// `check`'s host tests name them), else the backend's (`?` if none).
pub fn host_name(backend_host: Option<&str>) -> String {
    std::env::var("NCCL_HOSTID")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| backend_host.map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// `samples` of this process's ranks (global ranks from `first_rank`, on
/// `host`) put on rank 0's clock with `clock`. The error bound is the
/// process clock's plus the device clock's (GPU times were put on this
/// process's clock first).
pub fn aligned(
    samples: &ArrivalSamples,
    clock: ClockOffset,
    first_rank: usize,
    host: &str,
) -> ProcessArrivals {
    let us = |v: &[u64]| v.iter().map(|&t| clock.to_rank0_us(t)).collect::<Vec<_>>();
    let ranks = samples
        .ranks
        .iter()
        .enumerate()
        .map(|(local, s)| {
            let entry_us = us(&s.entry_ns);
            RankTimeline {
                rank: (first_rank + local) as u64,
                host: host.to_string(),
                start_us: if s.start_ns.len() >= s.entry_ns.len() {
                    us(&s.start_ns)
                } else {
                    entry_us.clone()
                },
                entry_us,
                end_us: us(&s.end_ns),
            }
        })
        .collect();
    ProcessArrivals {
        clock_error_ns: clock.error_ns + samples.device_clock_error_ns,
        ranks,
    }
}

/// The row's arrival figures from every process's part (process order),
/// or `None` where no process took samples.
pub fn row_arrival(
    parts: Vec<ProcessArrivals>,
    case: &CaseSpec,
    agg_iters: u64,
) -> Option<Arrival> {
    let errors: Vec<u64> = parts.iter().map(|p| p.clock_error_ns).collect();
    let ranks: Vec<RankTimeline> = parts.into_iter().flat_map(|p| p.ranks).collect();
    let coll = case.collective;
    let algbw_at_1us =
        coll.algbw_gbps(&case.counts, case.dtype.size_bytes(), case.world_size, 1e-6);
    let scale = Scale {
        clock_error_us: pair_error_us(&errors),
        agg_iters,
        busbw_gbps_at_1us: algbw_at_1us * coll.busbw_factor(case.world_size),
    };
    analyze(&ranks, scale)
}

#[cfg(test)]
mod tests {
    use super::super::RankSamples;
    use super::*;
    use collbench_core::{Collective, DataType, ReduceOp};

    #[test]
    fn processes_meet_on_rank_0s_clock_and_their_errors_add_up() {
        let samples = |base: u64| ArrivalSamples {
            ranks: (0..2)
                .map(|r| RankSamples {
                    entry_ns: (0..6).map(|i| base + i * 10_000 + r).collect(),
                    start_ns: Vec::new(),
                    end_ns: (0..6).map(|i| base + i * 10_000 + 5_000).collect(),
                })
                .collect(),
            device_clock_error_ns: 0,
        };
        // Process 1's clock reads 1 ms ahead: its offset takes it back,
        // and its rank 3 enters 2 us after everyone else.
        let p0 = aligned(&samples(0), ClockOffset::default(), 0, "a");
        let mut late = samples(1_000_000);
        late.ranks[1].entry_ns.iter_mut().for_each(|t| *t += 2_000);
        let clock = ClockOffset {
            offset_ns: -1_000_000,
            error_ns: 300,
        };
        let p1 = aligned(&late, clock, 2, "b");
        assert_eq!(p1.ranks[1].rank, 3);
        assert_eq!(p1.ranks[1].start_us, p1.ranks[1].entry_us);
        let case = CaseSpec {
            collective: Collective::AllReduce,
            dtype: DataType::Float,
            redop: ReduceOp::Sum,
            root: 0,
            counts: Collective::AllReduce.counts(1 << 20, 4, 4),
            in_place: false,
            world_size: 4,
        };
        let a = row_arrival(vec![p0, p1], &case, 1).unwrap();
        assert_eq!(a.clock_error_us, 0.3);
        assert_eq!(a.last_rank, 3);
        assert!((a.skew_us - 2.001).abs() < 1e-6, "{a:?}");
        // 1 MiB all_reduce over 4 ranks: 1.5 x 1048.576 GB/s at 1 us.
        let want = 1.5 * 1048.576 / a.device_time_us;
        assert!((a.device_busbw_gbps - want).abs() < 1e-6 * want, "{a:?}");
    }

    #[test]
    fn a_gpu_clocks_error_adds_to_its_process_clocks() {
        let samples = ArrivalSamples {
            ranks: vec![RankSamples {
                entry_ns: vec![1_000],
                start_ns: vec![4_000],
                end_ns: vec![9_000],
            }],
            device_clock_error_ns: 2_500,
        };
        let clock = ClockOffset {
            offset_ns: 1_000,
            error_ns: 300,
        };
        let p = aligned(&samples, clock, 5, "c");
        assert_eq!(p.clock_error_ns, 2_800);
        // The kernel's start, not the host entry, is the arrival.
        assert_eq!(p.ranks[0].start_us, [5.0]);
        assert_eq!(p.ranks[0].entry_us, [2.0]);
    }
}
