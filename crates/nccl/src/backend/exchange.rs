//! What the processes tell each other while setting up: their
//! NCCL_TESTS_SPLIT colours and their group's NCCL id. Both go through
//! the control plane's star around rank 0, so an all_gather would send
//! every process's part to every process: W x W parts (4096 processes'
//! colours and ids come to some 270 MB out of rank 0, 16384 to 4 GB). In
//! the common case, one group, a gather and a broadcast of a few bytes
//! do; only a real split needs every colour everywhere.

use collbench_core::{Bootstrap, PeerFailure};
use collbench_runner::BackendError;

/// Every process's colour, indexed by rank. Rank 0 gathers them and
/// broadcasts nothing when they are all the same (each process then knows
/// the list from its own colour), or the whole list when they differ.
pub(crate) fn colors(control: &dyn Bootstrap, color: u64) -> Result<Vec<u64>, BackendError> {
    let failed = |e: PeerFailure| BackendError::Library(e.to_string());
    let answer = match control
        .gather(color.to_le_bytes().to_vec())
        .map_err(failed)?
    {
        Some(parts) => {
            let colors = parts
                .iter()
                .map(|p| decode(p))
                .collect::<Option<Vec<u64>>>()
                .ok_or_else(|| malformed("a split colour"))?;
            let one_group = colors.iter().all(|&c| c == color);
            Some(if one_group {
                Vec::new()
            } else {
                encode(&colors)
            })
        }
        None => None,
    };
    let list = control.broadcast(answer).map_err(failed)?;
    if list.is_empty() {
        return Ok(vec![color; control.world_size()]);
    }
    let colors: Option<Vec<u64>> = list.chunks(8).map(decode).collect();
    colors
        .filter(|c| c.len() == control.world_size())
        .ok_or_else(|| malformed("the list of split colours"))
}

/// This process's group's NCCL id: made by `make` on the group's first
/// process (`first_in_group`), whose rank is `first`. With one group that
/// is rank 0, which broadcasts it; with several, every first process's id
/// goes to everyone (an all_gather whose other parts are empty).
pub(crate) fn group_id(
    control: &dyn Bootstrap,
    one_group: bool,
    first_in_group: bool,
    first: usize,
    make: impl FnOnce() -> Result<Vec<u8>, BackendError>,
) -> Result<Vec<u8>, BackendError> {
    let failed = |e: PeerFailure| BackendError::Library(e.to_string());
    let mine = if first_in_group { make()? } else { Vec::new() };
    if one_group {
        let from_rank_0 = (control.rank() == 0).then_some(mine);
        return control.broadcast(from_rank_0).map_err(failed);
    }
    let ids = control.all_gather(mine).map_err(failed)?;
    ids.into_iter()
        .nth(first)
        .ok_or_else(|| malformed("the NCCL ids"))
}

fn encode(colors: &[u64]) -> Vec<u8> {
    colors.iter().flat_map(|c| c.to_le_bytes()).collect()
}

fn decode(part: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(part.try_into().ok()?))
}

fn malformed(what: &str) -> BackendError {
    BackendError::Library(format!(
        "malformed {what} from another process (a different collbench version?)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::bootstrap::TwoProcesses;
    use collbench_core::SingleProcess;
    use collbench_launch::{Control, LaunchOptions, World};
    use std::thread;

    fn id(tag: u8) -> Result<Vec<u8>, BackendError> {
        Ok(vec![tag; 128])
    }

    #[test]
    fn a_world_of_one_is_one_group_with_its_own_id() {
        assert_eq!(colors(&SingleProcess, 5).unwrap(), [5]);
        let got = group_id(&SingleProcess, true, true, 0, || id(7)).unwrap();
        assert_eq!(got, vec![7; 128]);
    }

    #[test]
    fn rank_0_sends_nothing_for_one_group_and_the_list_for_several() {
        let same = TwoProcesses {
            peer: Some(3u64.to_le_bytes().to_vec()),
            failure: None,
        };
        assert_eq!(colors(&same, 3).unwrap(), [3, 3]);
        let split = TwoProcesses {
            peer: Some(1u64.to_le_bytes().to_vec()),
            failure: None,
        };
        assert_eq!(colors(&split, 0).unwrap(), [0, 1]);
        let garbage = TwoProcesses {
            peer: Some(vec![1, 2, 3]),
            failure: None,
        };
        let e = colors(&garbage, 0).unwrap_err().to_string();
        assert!(e.contains("malformed a split colour"), "{e}");
    }

    /// Runs `f` as ranks 0..n of one job over loopback, each a thread.
    fn job<T: Send + 'static>(
        n: usize,
        f: impl Fn(&Control) -> T + Send + Sync + Clone + 'static,
    ) -> Vec<T> {
        let port = World::free_loopback_port().unwrap();
        let handles: Vec<_> = (0..n)
            .map(|rank| {
                let f = f.clone();
                thread::spawn(move || {
                    let world = World::on_loopback(rank, n, port, "exchange");
                    let control = Control::connect(&world, &LaunchOptions::default()).unwrap();
                    f(&control)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn every_process_learns_the_colours_and_its_groups_id() {
        // One group: everyone gets rank 0's id.
        let got = job(4, |c| {
            let colors = colors(c, 9).unwrap();
            let id = group_id(c, true, c.rank() == 0, 0, || id(c.rank() as u8 + 1)).unwrap();
            (colors, id)
        });
        for (colors, id) in got {
            assert_eq!(colors, [9, 9, 9, 9]);
            assert_eq!(id, vec![1; 128]);
        }
        // NCCL_TESTS_SPLIT_MASK=1: ranks 0, 2 and 1, 3; each group's first
        // process (0 and 1) makes its id.
        let got = job(4, |c| {
            let colors = colors(c, c.rank() as u64 & 1).unwrap();
            let first = c.rank() & 1;
            let id = group_id(
                c,
                false,
                c.rank() == first,
                first,
                || id(c.rank() as u8 + 1),
            )
            .unwrap();
            (colors, id)
        });
        for (rank, (colors, id)) in got.into_iter().enumerate() {
            assert_eq!(colors, [0, 1, 0, 1]);
            assert_eq!(id, vec![(rank & 1) as u8 + 1; 128], "rank {rank}");
        }
    }
}
