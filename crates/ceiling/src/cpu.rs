//! The CPU backend's ceiling. Its ranks are threads on one host copying
//! through shared memory (`runner/src/cpu/algo.rs`) in passes: a copy of
//! L bytes, or an accumulation of L bytes of one input into the output
//! (`out += x`). Each pass writes its L bytes once, and an accumulation
//! pass runs as fast as a copy of the same length (measured here: 14.4-15.1
//! GB/s of accumulator against 14.3 GB/s copied, 4 MiB chunks of a 16 MiB
//! region on each of 2 cores; its third stream, the accumulator's read,
//! costs nothing extra). So the time of an op is at least the bytes its
//! passes write, W, over the probe's copy rate ([`crate::probe`]), and
//! in place the passes the algorithm skips (where the output already holds
//! the data: `copy` and `reduce_into` do nothing when source and
//! destination are the same) are not counted.
//!
//! Per op, with S the size column, n ranks and W the bytes written by all
//! ranks' passes together, per byte of S (out of place / in place):
//! - all_reduce: each rank copies its own chunk into its output,
//!   accumulates the n-1 others into it, and copies the n-1 reduced chunks
//!   of its peers: 2n-1; in place the first copy is skipped: 2(n-1);
//! - reduce_scatter (S is each rank's input) and reduce: n; n-1 (the copy
//!   of the own chunk, or root's, is skipped);
//! - all_gather, broadcast: n; n-1 (the own chunk, root's buffer, is
//!   already there);
//! - alltoall, sendrecv: n; 2n (the input is staged first).
//!
//! busbw <= factor x S x rate / W. The older count of least traffic (each
//! input byte read once, each output byte written once) gave every
//! placement the same bound, so in-place reduce_scatter, whose passes
//! write half of what out-of-place's do with 2 ranks, ran above it
//! (issue #50), and out-of-place reductions sat far under it.

use crate::probe::CopyLevel;
use crate::{Missing, Query};
use collbench_core::{Algorithm, Bottleneck, Ceiling, Collective, Topology};

/// Bytes written by all ranks' passes, per byte of the size column (see
/// the module comment).
fn written_per_byte(op: Collective, n: f64, in_place: bool) -> Option<f64> {
    Some(match op {
        Collective::AllReduce if in_place => 2.0 * (n - 1.0),
        Collective::AllReduce => 2.0 * n - 1.0,
        Collective::ReduceScatter
        | Collective::Reduce
        | Collective::AllGather
        | Collective::Broadcast
            if in_place =>
        {
            n - 1.0
        }
        Collective::ReduceScatter
        | Collective::Reduce
        | Collective::AllGather
        | Collective::Broadcast => n,
        // In place, the input is staged before peers read it.
        Collective::AllToAll | Collective::SendRecv if in_place => 2.0 * n,
        Collective::AllToAll | Collective::SendRecv => n,
        // No model of their copies yet: no ceiling rather than a wrong one.
        Collective::AllToAllV
        | Collective::Gather
        | Collective::Scatter
        | Collective::HyperCube => return None,
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
        written_per_byte(op, nf, in_place).ok_or(Missing("no CPU traffic model for this op"))?;
    let factor = op.busbw_factor(n as usize);
    let probe = match level {
        Some(region) => format!(
            "copy probe through {} per core, where these buffers fit in cache:",
            collbench_core::size::format_size(region)
        ),
        None => "copy probe".to_string(),
    };
    let placement = if in_place { "in place" } else { "out of place" };
    Ok(Ceiling {
        busbw_gbps: factor * copy / per_byte,
        bottleneck: Bottleneck::HostMemory,
        algorithm: Algorithm::CpuCopy,
        why: format!(
            "CPU ranks copy and accumulate through host memory in passes, each writing its bytes once at a copy's pace: \
             {placement} they write {per_byte} bytes per byte of the size, and memory copies {copy:.1} GB/s ({probe} {copy:.1} GB/s): \
             busbw <= {factor:.3} x {copy:.1} / {per_byte}"
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
    fn two_rank_all_reduce_writes_three_bytes_a_byte_two_in_place() {
        // Out of place: own chunk copied, the peer's accumulated, the
        // peer's reduced chunk copied: 3 x S/2 per rank, 3S in all; busbw
        // factor 1 at n = 2, so 10 / 3. In place the first copy is skipped.
        let c = cpu_ceiling(&host(10.0), &q(Collective::AllReduce, false), 2, &[]).unwrap();
        assert!((c.busbw_gbps - 10.0 / 3.0).abs() < 1e-9, "{}", c.busbw_gbps);
        assert_eq!(c.bottleneck, Bottleneck::HostMemory);
        let c = cpu_ceiling(&host(10.0), &q(Collective::AllReduce, true), 2, &[]).unwrap();
        assert!((c.busbw_gbps - 5.0).abs() < 1e-9, "{}", c.busbw_gbps);
        assert!(c.why.contains("in place"), "{}", c.why);
    }

    #[test]
    fn in_place_reduce_scatter_skips_the_copy_of_its_own_chunk() {
        // 2 ranks: n = 2 bytes written a byte out of place, 1 in place.
        for (n, ratio) in [(2, 2.0), (4, 4.0 / 3.0)] {
            let out = cpu_ceiling(&host(10.0), &q(Collective::ReduceScatter, false), n, &[]);
            let inp = cpu_ceiling(&host(10.0), &q(Collective::ReduceScatter, true), n, &[]);
            let r = inp.unwrap().busbw_gbps / out.unwrap().busbw_gbps;
            assert!((r - ratio).abs() < 1e-9, "{n} ranks: {r}");
        }
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
        // 80 GB/s copied, 3 bytes written a byte: 26.7.
        assert!((c.busbw_gbps - 80.0 / 3.0).abs() < 1e-9, "{}", c.busbw_gbps);
        assert!(c.why.contains("through 32K per core"), "{}", c.why);
    }
}
