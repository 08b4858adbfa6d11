//! The CPU backend's ceiling. Its ranks are threads on one host copying
//! through shared memory (`runner/src/cpu/algo.rs`), so every busbw byte
//! costs memory traffic, and the least traffic an op can do bounds it:
//! each input byte read once, each output byte written once, plus the
//! copies the algorithm cannot avoid. The probe ([`crate::probe`])
//! measures the same kind of traffic (a copy: one byte read, one written).
//!
//! Per op, with S the size column, n ranks and T the bytes read plus
//! written by all ranks together:
//! - all_reduce (reduce-scatter into the owner's output, then each rank
//!   copies the other n-1 chunks): T = nS read + S written + 2(n-1)S
//!   copied = (3n-1)S;
//! - reduce_scatter (S is each rank's input): T = nS read + S written;
//! - all_gather (S is each rank's output): T = 2nS, 2(n-1)S in place
//!   (the own chunk is already there); broadcast likewise;
//! - alltoall, sendrecv: T = 2nS, twice that in place (the input is
//!   staged first); reduce: T = nS + S.
//!
//! The time is at least T over the probe's rate, so busbw <= factor x S x
//! rate / T.

use crate::probe::CopyLevel;
use crate::{Missing, Query};
use collbench_core::{Algorithm, Bottleneck, Ceiling, Collective, Topology};

/// Bytes read plus written by all ranks, per byte of the size column.
fn traffic_per_byte(op: Collective, n: f64, in_place: bool) -> Option<f64> {
    Some(match op {
        Collective::AllReduce => 3.0 * n - 1.0,
        Collective::ReduceScatter => n + 1.0,
        Collective::Reduce => n + 1.0,
        // In place, the own chunk (root's buffer) is already where it goes.
        Collective::AllGather | Collective::Broadcast if in_place => 2.0 * (n - 1.0),
        Collective::AllGather | Collective::Broadcast => 2.0 * n,
        // In place, the input is staged before peers read it.
        Collective::AllToAll | Collective::SendRecv if in_place => 4.0 * n,
        Collective::AllToAll | Collective::SendRecv => 2.0 * n,
        _ => return None,
    })
}

/// The copy rate a row of `bytes` over `n` ranks can see: that of the
/// first cache level whose regions hold the ranks' buffers (at least one
/// input and one output of `bytes` each, so n x bytes per side), else host
/// memory's (`main`). Never under `main`: a cache is not slower than the
/// memory behind it, and a bound must not sit under what a row reaches.
fn copy_rate(main: f64, levels: &[CopyLevel], n: u64, bytes: u64) -> (f64, Option<u64>) {
    let held = n.saturating_mul(bytes);
    levels
        .iter()
        .find(|l| l.region_bytes.saturating_mul(l.threads) >= held)
        .filter(|l| l.copy_gbps > main)
        .map_or((main, None), |l| (l.copy_gbps, Some(l.region_bytes)))
}

/// The ceiling of `op` over `n` CPU ranks at `bytes` on a host whose
/// memory moves `topo.cpu.mem_copy_gbps` (bytes copied per second, all
/// cores), or a cache level's rate ([`CopyLevel`]) where the row's buffers
/// fit in it.
pub(crate) fn cpu_ceiling(
    topo: &Topology,
    q: &Query,
    n: u64,
    levels: &[CopyLevel],
) -> Result<Ceiling, Missing> {
    let (op, in_place) = (q.op, q.in_place);
    let main = topo
        .cpu
        .as_ref()
        .and_then(|c| c.mem_copy_gbps)
        .ok_or(Missing("host memory bandwidth unknown"))?;
    let (copy, level) = copy_rate(main, levels, n, q.bytes);
    if n < 2 {
        return Err(Missing("one rank moves no data"));
    }
    let nf = n as f64;
    let per_byte =
        traffic_per_byte(op, nf, in_place).ok_or(Missing("no CPU traffic model for this op"))?;
    // A copy of B bytes is 2B of traffic: the probe's rate in traffic.
    let traffic_gbps = 2.0 * copy;
    let factor = op.busbw_factor(n as usize);
    let probe = match level {
        Some(region) => format!(
            "copy probe through {} per core, where these buffers fit in cache:",
            collbench_core::size::format_size(region)
        ),
        None => "copy probe".to_string(),
    };
    Ok(Ceiling {
        busbw_gbps: factor * traffic_gbps / per_byte,
        bottleneck: Bottleneck::HostMemory,
        algorithm: Algorithm::CpuCopy,
        why: format!(
            "CPU ranks copy through host memory: {per_byte} bytes read+written per byte of the size, memory moves {traffic_gbps:.1} GB/s ({probe} {copy:.1} GB/s x 2): busbw <= {factor:.3} x {traffic_gbps:.1} / {per_byte}"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::CpuTopology;

    fn host(copy: f64) -> Topology {
        Topology {
            hosts: 1,
            cpu: Some(CpuTopology {
                cores: Some(2),
                mem_copy_gbps: Some(copy),
            }),
            ..Topology::default()
        }
    }

    #[test]
    fn two_rank_all_reduce_is_a_fifth_of_memory_traffic() {
        // (3n-1)S = 5S of traffic for busbw factor 1 at n = 2.
        let c = cpu_ceiling(&host(10.0), &q(Collective::AllReduce, false), 2, &[]).unwrap();
        assert!((c.busbw_gbps - 4.0).abs() < 1e-9, "{}", c.busbw_gbps);
        assert_eq!(c.bottleneck, Bottleneck::HostMemory);
    }

    #[test]
    fn in_place_alltoall_pays_for_its_staging() {
        let out = cpu_ceiling(&host(10.0), &q(Collective::AllToAll, false), 4, &[]).unwrap();
        let inp = cpu_ceiling(&host(10.0), &q(Collective::AllToAll, true), 4, &[]).unwrap();
        assert!((out.busbw_gbps / inp.busbw_gbps - 2.0).abs() < 1e-9);
    }

    #[test]
    fn unknown_memory_bandwidth_is_missing_not_an_error() {
        let t = Topology {
            hosts: 1,
            ..Topology::default()
        };
        assert!(cpu_ceiling(&t, &q(Collective::AllReduce, false), 2, &[]).is_err());
    }

    fn q(op: Collective, in_place: bool) -> Query {
        Query {
            op,
            bytes: 64 << 20,
            in_place,
            algorithm: None,
        }
    }

    fn level(kib: u64, gbps: f64) -> CopyLevel {
        CopyLevel {
            region_bytes: kib << 10,
            threads: 2,
            copy_gbps: gbps,
        }
    }

    #[test]
    fn a_row_that_fits_a_cache_level_is_bounded_by_its_rate() {
        let levels = [level(32, 80.0), level(256, 40.0), level(2048, 20.0)];
        // 2 ranks x 16 KiB = 32 KiB fits the first level (2 x 32 KiB).
        assert_eq!(
            copy_rate(10.0, &levels, 2, 16 << 10),
            (80.0, Some(32 << 10))
        );
        // 2 x 200 KiB fits 2 x 256 KiB, not 2 x 32 KiB.
        assert_eq!(
            copy_rate(10.0, &levels, 2, 200 << 10),
            (40.0, Some(256 << 10))
        );
        // 64 MiB fits no cache: host memory's rate.
        assert_eq!(copy_rate(10.0, &levels, 2, 64 << 20), (10.0, None));
        // A level measured under memory's rate is not used (a bound never
        // drops), nor are levels where there are none.
        assert_eq!(copy_rate(30.0, &levels, 2, 1 << 20), (30.0, None));
        assert_eq!(copy_rate(10.0, &[], 2, 8), (10.0, None));
        // Extremes: no overflow at u64::MAX bytes.
        assert_eq!(copy_rate(10.0, &levels, 4, u64::MAX), (10.0, None));
        let mut small = q(Collective::AllReduce, false);
        small.bytes = 16 << 10;
        let c = cpu_ceiling(&host(10.0), &small, 2, &levels).unwrap();
        assert!((c.busbw_gbps - 32.0).abs() < 1e-9, "{}", c.busbw_gbps);
        assert!(c.why.contains("through 32K per core"), "{}", c.why);
    }
}
