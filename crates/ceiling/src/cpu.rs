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

use crate::probe::{CopyLevel, MAX_REGION_BYTES};
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

/// Bytes the busiest rank's passes write, per byte of the size column:
/// every op shares its writes evenly over the ranks but broadcast in
/// place, whose root's buffer already holds the data: each other rank
/// copies all S, the root nothing.
fn busiest_per_byte(op: Collective, n: f64, in_place: bool) -> Option<f64> {
    Some(match op {
        Collective::Broadcast if in_place => 1.0,
        Collective::AllReduce
        | Collective::ReduceScatter
        | Collective::Reduce
        | Collective::AllGather
        | Collective::Broadcast
        | Collective::AllToAll
        | Collective::SendRecv
        | Collective::AllToAllV
        | Collective::Gather
        | Collective::Scatter
        | Collective::HyperCube => written_per_byte(op, n, in_place)? / n,
    })
}

/// The busiest rank's bound: its writes at the pace of one thread copying
/// alone (a rank is one thread, and no neighbour makes it faster). Where
/// fewer ranks write than the probes had cores, the cores' sum overstates
/// what the writers reach: a broadcast in place over 2 ranks has one
/// writer, and 2 ranks on a 64-core host two. `None` where a solo rate
/// was not probed.
fn solo_bound(
    topo: &Topology,
    levels: &[CopyLevel],
    footprint: f64,
    busiest: f64,
) -> Option<(f64, f64)> {
    let main = topo.cpu.as_ref()?.mem_copy_solo_gbps?;
    let solo: Vec<CopyLevel> = levels
        .iter()
        .map(|l| {
            Some(CopyLevel {
                copy_gbps: l.solo_gbps?,
                ..*l
            })
        })
        .collect::<Option<_>>()?;
    let (rate, _) = copy_rate(main, &solo, footprint);
    Some((rate / busiest, rate))
}

/// Bytes of buffers all ranks' passes touch in one operation, per byte of
/// the size column: out of place each rank's input and output (all_gather's
/// input and reduce_scatter's output are S/n; broadcast's and reduce's
/// peers touch one buffer each beside the root's two), in place the output
/// alone, and alltoall's and sendrecv's staging copy. The least a row can
/// hold in cache: rotation (`runner/src/host_buffers.rs`) only adds to it.
fn touched_per_byte(op: Collective, n: f64, in_place: bool) -> Option<f64> {
    Some(match op {
        Collective::AllToAll | Collective::SendRecv => 2.0 * n,
        Collective::AllReduce
        | Collective::AllGather
        | Collective::ReduceScatter
        | Collective::Broadcast
        | Collective::Reduce
            if in_place =>
        {
            n
        }
        Collective::AllReduce => 2.0 * n,
        Collective::AllGather
        | Collective::ReduceScatter
        | Collective::Broadcast
        | Collective::Reduce => n + 1.0,
        Collective::AllToAllV
        | Collective::Gather
        | Collective::Scatter
        | Collective::HyperCube => return None,
    })
}

/// The fastest a row can copy through `footprint` bytes of buffers a core,
/// GB/s. The probes are steps (a probe holds `2 x region` a thread, its
/// source and destination; host memory's counts as the step of
/// [`MAX_REGION_BYTES`]): the footprint's bytes from one step's size to
/// the next go at that step's rate, those under the first at the first's,
/// those past the last at memory's. At best a row keeps its first bytes in
/// the fastest level and spills the rest level by level, and a byte a
/// probe of its size holds is served at least that fast, so this is a
/// bound wherever the row's data sits. Taking the one probe nearest the
/// footprint is not: a probe just past a cache's size cycles through it
/// and misses on every line, while a row of that footprint whose staging
/// buffer stays put hits on part of it (an alltoall in place over 4 ranks
/// reached 0.68 of such a bound with a fifth of a core's time). Never
/// under `main`: a cache is not slower than the memory behind it. The
/// second value: the smallest and largest regions probed (`None` where no
/// level was probed: memory's rate alone).
fn copy_rate(main: f64, levels: &[CopyLevel], footprint: f64) -> (f64, Option<(u64, u64)>) {
    let regions = levels.iter().map(|l| l.region_bytes);
    let (Some(first), Some(last)) = (regions.clone().min(), regions.max()) else {
        return (main, None);
    };
    let mut steps: Vec<(f64, f64)> = levels
        .iter()
        .map(|l| (2.0 * l.region_bytes as f64, l.copy_gbps.max(main)))
        .collect();
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    steps.push((2.0 * MAX_REGION_BYTES as f64, main));
    let (mut secs, mut held) = (0.0, 0.0);
    for (k, &(_, rate)) in steps.iter().enumerate() {
        let next = steps.get(k + 1).map_or(f64::INFINITY, |s| s.0);
        let upto = next.min(footprint);
        if upto > held {
            secs += (upto - held) / rate;
            held = upto;
        }
    }
    let gbps = if secs > 0.0 {
        footprint / secs
    } else {
        steps[0].1
    };
    (gbps, Some((first, last)))
}

/// Bytes a core holds, for people: "1.5 MiB", "96 KiB", "2 KiB".
fn footprint_label(bytes: f64) -> String {
    if bytes >= (1 << 20) as f64 {
        format!("{:.1} MiB", bytes / (1 << 20) as f64)
    } else {
        format!("{:.0} KiB", bytes / 1024.0)
    }
}

/// The ceiling of `op` over `n` CPU ranks at `bytes` on a host whose
/// memory moves `topo.cpu.mem_copy_gbps` (bytes copied per second, all
/// cores), or a cache level's rate ([`CopyLevel`]) where the row's buffers
/// are small enough to stay in it.
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
    if n < 2 {
        return Err(Missing("one rank moves no data"));
    }
    let nf = n as f64;
    let none = Missing("no CPU traffic model for this op");
    let per_byte = written_per_byte(op, nf, in_place).ok_or(none)?;
    let touched = touched_per_byte(op, nf, in_place).ok_or(none)?;
    // Ranks beyond the cores share them, and their buffers the cores' caches.
    let cores = levels
        .first()
        .map(|l| l.threads)
        .or_else(|| topo.cpu.as_ref().and_then(|c| c.cores))
        .unwrap_or(n)
        .clamp(1, n);
    let footprint = touched * q.bytes as f64 / cores as f64;
    let (copy, level) = copy_rate(main, levels, footprint);
    let factor = op.busbw_factor(n as usize);
    let probe = match level {
        Some((first, last)) => format!(
            "copy probes through {} to {} per core and memory's; of these buffers' {} per core, the bytes past each probe's footprint at that probe's rate:",
            collbench_core::size::format_size(first),
            collbench_core::size::format_size(last),
            footprint_label(footprint)
        ),
        None => "copy probe".to_string(),
    };
    let placement = if in_place { "in place" } else { "out of place" };
    let all = factor * copy / per_byte;
    let busiest = busiest_per_byte(op, nf, in_place).ok_or(none)?;
    let (busbw_gbps, why) = match solo_bound(topo, levels, footprint, busiest) {
        Some((per_rank, solo)) if factor * per_rank < all => (
            factor * per_rank,
            format!(
                "CPU ranks copy and accumulate through host memory in passes, each rank one thread: \
                 {placement} the busiest rank writes {busiest:.3} bytes per byte of the size, and one thread alone copies {solo:.1} GB/s \
                 (the cores together {copy:.1}, more than these writers reach): busbw <= {factor:.3} x {solo:.1} / {busiest:.3}"
            ),
        ),
        _ => (
            all,
            format!(
                "CPU ranks copy and accumulate through host memory in passes, each writing its bytes once at a copy's pace: \
                 {placement} they write {per_byte} bytes per byte of the size, and memory copies {copy:.1} GB/s ({probe} {copy:.1} GB/s): \
                 busbw <= {factor:.3} x {copy:.1} / {per_byte}"
            ),
        ),
    };
    Ok(Ceiling {
        busbw_gbps,
        bottleneck: Bottleneck::HostMemory,
        algorithm: Algorithm::CpuCopy,
        why,
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
                mem_copy_solo_gbps: None,
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
            solo_gbps: None,
        }
    }

    /// `copy_rate`'s value within 1e-9 relative.
    fn near(got: f64, want: f64) -> bool {
        (got - want).abs() <= 1e-9 * want
    }

    #[test]
    fn each_byte_of_a_row_goes_at_the_rate_of_the_largest_probe_within_it() {
        // Probes of 32 KiB, 256 KiB, 2 MiB a thread: steps at 64 KiB,
        // 512 KiB and 4 MiB of footprint, memory's (10 GB/s) at 32 MiB.
        let levels = [level(32, 80.0), level(256, 40.0), level(2048, 20.0)];
        let kib = |k: f64| k * 1024.0;
        let rate = |f: f64| copy_rate(10.0, &levels, kib(f)).0;
        // Up to the second step, all at the first probe's rate.
        assert!(near(rate(0.001), 80.0));
        assert!(near(rate(100.0), 80.0));
        assert!(near(rate(512.0), 80.0));
        // 1 MiB: 512 KiB at 80, 512 KiB at 40.
        assert!(near(rate(1024.0), 1024.0 / (512.0 / 80.0 + 512.0 / 40.0)));
        // 8 MiB: 512 KiB at 80, 3.5 MiB at 40, 4 MiB at 20.
        let secs = 512.0 / 80.0 + 3584.0 / 40.0 + 4096.0 / 20.0;
        assert!(near(rate(8192.0), 8192.0 / secs));
        // 128 MiB: up to 32 MiB as above (the last 24 MiB at 20), the
        // rest at memory's rate: near memory's, above it.
        let secs = secs + 24576.0 / 20.0 + 98304.0 / 10.0;
        assert!(near(rate(131072.0), 131072.0 / secs));
        assert!(rate(1e15) > 10.0 && rate(1e15) < 10.001);
        // The rate never rises with the footprint.
        let sizes = [1.0, 64.0, 300.0, 600.0, 4096.0, 40000.0, 1e7];
        assert!(sizes.windows(2).all(|w| rate(w[0]) >= rate(w[1])));
        // A level measured under memory's rate counts at memory's (a bound
        // never drops); without levels, memory's rate alone.
        let slow = [level(32, 5.0)];
        assert!(near(copy_rate(10.0, &slow, kib(16.0)).0, 10.0));
        assert_eq!(copy_rate(10.0, &[], 8.0), (10.0, None));
        assert_eq!(copy_rate(10.0, &levels, 8.0).1, Some((32 << 10, 2 << 20)));
    }

    #[test]
    fn the_footprint_counts_every_ranks_buffers_over_the_cores() {
        let levels = [level(32, 80.0), level(256, 40.0), level(2048, 20.0)];
        let ceiling = |bytes: u64, n: u64, in_place: bool| {
            let mut row = q(Collective::AllReduce, in_place);
            row.bytes = bytes;
            cpu_ceiling(&host(10.0), &row, n, &levels).unwrap()
        };
        // 16 KiB over 2 ranks: 2 x (16 + 16) KiB, 32 KiB a core, within
        // the first step: 80 GB/s, 3 bytes written a byte.
        let c = ceiling(16 << 10, 2, false);
        assert!(near(c.busbw_gbps, 80.0 / 3.0), "{}", c.busbw_gbps);
        assert!(c.why.contains("32 KiB per core"), "{}", c.why);
        assert!(c.why.contains("through 32K to 2M per core"), "{}", c.why);
        // 256 KiB over 4 ranks on 2 cores: 4 x 512 KiB / 2 = 1 MiB a
        // core; busbw factor 1.5, 7 bytes written a byte.
        let mib = 1024.0 / (512.0 / 80.0 + 512.0 / 40.0);
        let c = ceiling(256 << 10, 4, false);
        assert!(near(c.busbw_gbps, 1.5 * mib / 7.0), "{}", c.busbw_gbps);
        // In place holds half (512 KiB a core: 80) and writes 6 a byte.
        let c = ceiling(256 << 10, 4, true);
        assert!(near(c.busbw_gbps, 1.5 * 80.0 / 6.0), "{}", c.busbw_gbps);
        // 64 MiB over 2 ranks, 128 MiB a core: above memory's 10 / 3 by
        // what the first 32 MiB gain, no more.
        let c = ceiling(64 << 20, 2, false);
        let want = copy_rate(10.0, &levels, (128u64 << 20) as f64).0 / 3.0;
        assert!(near(c.busbw_gbps, want), "{}", c.busbw_gbps);
        assert!(c.busbw_gbps > 10.0 / 3.0 && c.busbw_gbps < 1.2 * 10.0 / 3.0);
    }

    fn host_with_solo(copy: f64, solo: f64) -> Topology {
        let mut t = host(copy);
        t.cpu.as_mut().unwrap().mem_copy_solo_gbps = Some(solo);
        t
    }

    #[test]
    fn a_broadcast_in_place_has_one_writer_at_one_threads_pace() {
        // 2 ranks, 2 cores: out of place both ranks copy S (2 bytes a
        // byte at the cores' 10); in place rank 1 copies S alone, at one
        // thread's 5, not at 10 / 1.
        let t = host_with_solo(10.0, 5.0);
        let out = cpu_ceiling(&t, &q(Collective::Broadcast, false), 2, &[]).unwrap();
        assert!(near(out.busbw_gbps, 10.0 / 2.0), "{}", out.busbw_gbps);
        let inp = cpu_ceiling(&t, &q(Collective::Broadcast, true), 2, &[]).unwrap();
        assert!(near(inp.busbw_gbps, 5.0), "{}", inp.busbw_gbps);
        assert!(
            inp.why.contains("one thread alone copies 5.0"),
            "{}",
            inp.why
        );
        // Without a solo probe, the cores' bound as before.
        let old = cpu_ceiling(&host(10.0), &q(Collective::Broadcast, true), 2, &[]).unwrap();
        assert!(near(old.busbw_gbps, 10.0), "{}", old.busbw_gbps);
    }

    #[test]
    fn two_ranks_on_many_cores_are_bound_by_two_threads() {
        // All cores together copy 100, one thread 8: an all_reduce over 2
        // ranks writes 3 bytes a byte, 1.5 each: 8 / 1.5, not 100 / 3.
        let t = host_with_solo(100.0, 8.0);
        let c = cpu_ceiling(&t, &q(Collective::AllReduce, false), 2, &[]).unwrap();
        assert!(near(c.busbw_gbps, 8.0 / 1.5), "{}", c.busbw_gbps);
        // Where the ranks fill the cores the cores' sum is the lower bound
        // and stays (2 ranks, one thread 6 of the cores' 10).
        let t = host_with_solo(10.0, 6.0);
        let c = cpu_ceiling(&t, &q(Collective::AllReduce, false), 2, &[]).unwrap();
        assert!(near(c.busbw_gbps, 10.0 / 3.0), "{}", c.busbw_gbps);
    }

    #[test]
    fn a_level_without_its_solo_rate_leaves_the_solo_bound_out() {
        let t = host_with_solo(10.0, 5.0);
        let levels = [level(32, 80.0)];
        let c = cpu_ceiling(&t, &q(Collective::Broadcast, true), 2, &levels).unwrap();
        let alone = cpu_ceiling(&host(10.0), &q(Collective::Broadcast, true), 2, &levels);
        assert!(near(c.busbw_gbps, alone.unwrap().busbw_gbps));
        let with_solo = [CopyLevel {
            solo_gbps: Some(40.0),
            ..level(32, 80.0)
        }];
        let c = cpu_ceiling(&t, &q(Collective::Broadcast, true), 2, &with_solo).unwrap();
        assert!(c.why.contains("one thread alone"), "{}", c.why);
    }
}
