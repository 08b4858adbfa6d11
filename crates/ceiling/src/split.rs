//! nccl-tests' NCCL_TESTS_SPLIT_MASK: rank r of the job joins the
//! communicator `r & mask`, all of them running at once. A published
//! "allreduce_splitmask7" on 8-GPU hosts is eight all_reduces, one rank
//! per host each (one per rail), sharing every host's NICs. This turns a
//! mask and a job into the shape of one such communicator, so its ceiling
//! is that of a smaller job with a share of the NICs.

use std::collections::{BTreeMap, HashMap};

/// Jobs larger than this are not enumerated rank by rank.
pub const MAX_RANKS: u64 = 1 << 20;

/// One communicator of a split job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitShape {
    /// Hosts the communicator spans.
    pub hosts: u64,
    /// Its ranks on each of them.
    pub ranks_per_host: u64,
    /// Communicators on each host, sharing its NICs.
    pub per_host_comms: u64,
}

/// The shape of every communicator of `mask` on `hosts` hosts of
/// `per_host` ranks, ranks numbered host by host (as `mpirun -H a:8,b:8`
/// places them). An error line where the communicators differ in shape:
/// the model takes equal ones.
pub fn split_shape(hosts: u64, per_host: u64, mask: u64) -> Result<SplitShape, String> {
    let world = hosts
        .checked_mul(per_host)
        .filter(|&w| w > 0 && w <= MAX_RANKS)
        .ok_or_else(|| {
            format!("--split-mask on {hosts} hosts x {per_host} ranks: give a job of 1 to {MAX_RANKS} ranks")
        })?;
    // colour -> host -> ranks of that colour on the host
    let mut comms: HashMap<u64, BTreeMap<u64, u64>> = HashMap::new();
    for rank in 0..world {
        *comms
            .entry(rank & mask)
            .or_default()
            .entry(rank / per_host)
            .or_default() += 1;
    }
    let shape = |c: &BTreeMap<u64, u64>| {
        let first = *c.values().next().unwrap_or(&0);
        c.values()
            .all(|&n| n == first)
            .then_some((c.len() as u64, first))
    };
    let mut shapes = comms.values().map(shape);
    let first = shapes.next().flatten();
    match first {
        Some((hosts, ranks_per_host)) if shapes.all(|s| s == first) => Ok(SplitShape {
            hosts,
            ranks_per_host,
            per_host_comms: per_host / ranks_per_host,
        }),
        _ => Err(format!(
            "--split-mask {mask:#x} makes communicators of unequal shape on {hosts} hosts x {per_host} ranks: the ceiling model takes equal ones (a mask below the ranks per host, such as 0x7 on 8)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_7_on_8_gpu_hosts_is_one_rank_per_host_per_rail() {
        let s = split_shape(2, 8, 0x7).unwrap();
        assert_eq!(
            s,
            SplitShape {
                hosts: 2,
                ranks_per_host: 1,
                per_host_comms: 8
            }
        );
    }

    #[test]
    fn mask_1_pairs_even_and_odd_ranks() {
        let s = split_shape(4, 8, 0x1).unwrap();
        assert_eq!((s.hosts, s.ranks_per_host, s.per_host_comms), (4, 4, 2));
    }

    #[test]
    fn mask_0_is_the_whole_job() {
        let s = split_shape(3, 8, 0).unwrap();
        assert_eq!((s.hosts, s.ranks_per_host, s.per_host_comms), (3, 8, 1));
    }

    #[test]
    fn unequal_and_oversized_splits_are_one_line() {
        // 6 ranks per host, mask 4: colours 0 and 4 get 4 and 2 ranks.
        let e = split_shape(1, 6, 0x4).unwrap_err();
        assert!(e.contains("unequal shape") && !e.contains('\n'), "{e}");
        let e = split_shape(u64::MAX, 8, 7).unwrap_err();
        assert!(e.contains("1 to"), "{e}");
        assert!(split_shape(0, 8, 7).is_err());
    }
}
