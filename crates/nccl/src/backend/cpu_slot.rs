//! Which CPU slot this process's launch thread may take on its machine:
//! its index among the job's processes that share the machine's kernel.
//!
//! The launcher's LOCAL_RANK is not enough. Kubernetes pods with one GPU
//! each all see LOCAL_RANK=0 on a node they share; so do processes that
//! emulate hosts on one GPU (NCCL_HOSTID). Pinning by it put every
//! process's launch thread on one CPU: 213-279 us at 8 B-512 B against
//! nccl-tests' 27-42 us (two emulated hosts on one H200). So the processes
//! tell rank 0 which kernel they run on (its boot id, the same in every
//! container of a machine, different on every machine and boot) and their
//! local rank; rank 0 answers with one byte when the local ranks already
//! tell the processes of each machine apart (the common case, any world
//! size), or with each process's slot when they do not. A process that
//! cannot read its boot id gets no slot and is not pinned.

use collbench_core::{Bootstrap, PeerFailure};
use collbench_runner::BackendError;

/// The kernel this process runs on, from Linux's boot id (a UUID); `None`
/// where there is none to read.
pub(crate) fn machine_id() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    parse_boot_id(&text)
}

/// A boot id's 128 bits folded to 64 (0 is kept for "unknown").
fn parse_boot_id(text: &str) -> Option<u64> {
    let hex: String = text.trim().chars().filter(|c| *c != '-').collect();
    let bits = u128::from_str_radix(&hex, 16).ok()?;
    let folded = (bits >> 64) as u64 ^ bits as u64;
    (folded != 0).then_some(folded)
}

/// What one process tells rank 0: its machine (0: unknown) and its local
/// rank.
fn encode(machine: Option<u64>, local_rank: usize) -> Vec<u8> {
    let mut b = machine.unwrap_or(0).to_le_bytes().to_vec();
    b.extend((local_rank as u64).to_le_bytes());
    b
}

fn decode(part: &[u8]) -> Option<(u64, u64)> {
    let m = u64::from_le_bytes(part.get(..8)?.try_into().ok()?);
    let l = u64::from_le_bytes(part.get(8..16)?.try_into().ok()?);
    Some((m, l))
}

/// Rank 0's answer: every process's slot, given (machine, local rank) per
/// rank. `None` when each process's local rank is already its slot: the
/// local ranks of every machine's processes are distinct and every
/// machine is known. Otherwise a slot per rank (its index among the
/// earlier ranks on the same machine), `u16::MAX` for an unknown machine.
fn slots(parts: &[(u64, u64)]) -> Option<Vec<u16>> {
    let mut seen = std::collections::HashSet::new();
    let trusted = parts.iter().all(|&(m, l)| m != 0 && seen.insert((m, l)));
    if trusted {
        return None;
    }
    let mut next: std::collections::HashMap<u64, u16> = Default::default();
    let slots = parts
        .iter()
        .map(|&(m, _)| {
            if m == 0 {
                return u16::MAX;
            }
            let n = next.entry(m).or_insert(0);
            *n = n.saturating_add(1);
            *n - 1
        })
        .collect();
    Some(slots)
}

/// This process's CPU slot on its machine, agreed with every other
/// process (a collective call: every process makes it, in order). `None`:
/// do not pin (the machine is unknown).
pub(crate) fn agree(
    control: &dyn Bootstrap,
    machine: Option<u64>,
    local_rank: usize,
) -> Result<Option<usize>, BackendError> {
    let failed = |e: PeerFailure| BackendError::Library(e.to_string());
    let answer = match control
        .gather(encode(machine, local_rank))
        .map_err(failed)?
    {
        Some(parts) => {
            let parts: Option<Vec<(u64, u64)>> = parts.iter().map(|p| decode(p)).collect();
            let parts = parts.ok_or_else(malformed)?;
            Some(slots(&parts).map_or_else(Vec::new, |s| {
                s.iter().flat_map(|x| x.to_le_bytes()).collect()
            }))
        }
        None => None,
    };
    let list = control.broadcast(answer).map_err(failed)?;
    if list.is_empty() {
        return Ok(machine.map(|_| local_rank));
    }
    let at = control.rank() * 2;
    let slot = list
        .get(at..at + 2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .filter(|_| list.len() == control.world_size() * 2)
        .ok_or_else(malformed)?;
    Ok((slot != u16::MAX).then_some(slot as usize))
}

fn malformed() -> BackendError {
    BackendError::Library(
        "malformed CPU slot exchange from another process (a different collbench version?)".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_launch::{Control, LaunchOptions, World};

    #[test]
    fn a_boot_id_folds_to_a_machine() {
        let id = parse_boot_id("6b1c2a3e-0f4d-4c1b-9a2e-5d6f7a8b9c0d\n").unwrap();
        assert_eq!(id, 0x6b1c2a3e0f4d4c1b ^ 0x9a2e5d6f7a8b9c0d);
        assert_eq!(parse_boot_id("not a uuid"), None);
        assert_eq!(parse_boot_id(""), None);
    }

    #[test]
    fn distinct_local_ranks_per_machine_need_no_list() {
        // Two machines of two processes each, as a launcher numbers them.
        assert_eq!(slots(&[(7, 0), (7, 1), (9, 0), (9, 1)]), None);
        // One process per machine, every one at local rank 0.
        assert_eq!(slots(&[(7, 0), (8, 0), (9, 0)]), None);
    }

    #[test]
    fn processes_sharing_a_machine_at_one_local_rank_get_distinct_slots() {
        // One-GPU pods (or emulated hosts) on one node: LOCAL_RANK=0 each.
        assert_eq!(slots(&[(7, 0), (7, 0), (7, 0)]), Some(vec![0, 1, 2]));
        // Two nodes, two such pods each.
        assert_eq!(
            slots(&[(7, 0), (9, 0), (7, 0), (9, 0)]),
            Some(vec![0, 0, 1, 1])
        );
    }

    #[test]
    fn an_unknown_machine_gets_no_slot() {
        assert_eq!(slots(&[(0, 0), (7, 0)]), Some(vec![u16::MAX, 0]));
    }

    /// Ranks 0..n of one job over loopback, each a thread, all on this
    /// machine with the local ranks given: the slot each one agrees on.
    fn agreed(local_ranks: Vec<usize>, machine: Option<u64>) -> Vec<Option<usize>> {
        let n = local_ranks.len();
        let port = World::free_loopback_port().unwrap();
        let handles: Vec<_> = (0..n)
            .map(|rank| {
                let local = local_ranks[rank];
                std::thread::spawn(move || {
                    let world = World::on_loopback(rank, n, port, "cpu-slot");
                    let control = Control::connect(&world, &LaunchOptions::default()).unwrap();
                    agree(&control, machine, local).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn four_processes_at_local_rank_0_on_one_machine_take_four_slots() {
        assert_eq!(
            agreed(vec![0, 0, 0, 0], Some(42)),
            [Some(0), Some(1), Some(2), Some(3)]
        );
    }

    #[test]
    fn four_processes_with_their_own_local_ranks_keep_them() {
        assert_eq!(
            agreed(vec![1, 0, 3, 2], Some(42)),
            [Some(1), Some(0), Some(3), Some(2)]
        );
    }

    #[test]
    fn processes_that_cannot_name_their_machine_are_not_pinned() {
        assert_eq!(agreed(vec![0, 1], None), [None, None]);
    }
}
