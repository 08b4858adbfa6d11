//! [`Bootstrap`]: the little the runner, the checks and the backends need
//! from the processes of a job: who this process is, and small messages
//! (results, device lists, unique ids) exchanged between processes.
//!
//! collbench-launch implements it over TCP (`collbench_launch::Control`);
//! [`SingleProcess`] is the world of one, for single-process runs and
//! tests. Bulk data never moves through it: backends do that.

use crate::progress::{Progress, RankProgress};

/// What ended a job, as the exit code sees it: the code follows the kind,
/// never the message's wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The processes failed to talk: a peer missing, refused, crashed or
    /// silent, a deadline passed, ranks making different calls, a rank
    /// that aborted.
    #[default]
    Peer,
    /// The watchdog stopped the job: a collective made no progress for
    /// its deadline (the line names who is behind).
    Stuck,
}

/// A failure of the job: its kind and one line naming the rank and host
/// where known. The CLI decides the exit code from the kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PeerFailure {
    /// Which failure this is.
    pub kind: FailureKind,
    /// What failed, in one line.
    pub message: String,
}

impl PeerFailure {
    /// A failure of the processes to talk ([`FailureKind::Peer`]).
    pub fn new(message: impl Into<String>) -> PeerFailure {
        PeerFailure {
            kind: FailureKind::Peer,
            message: message.into(),
        }
    }

    /// The watchdog's stop of a stuck collective ([`FailureKind::Stuck`]).
    pub fn stuck(line: impl Into<String>) -> PeerFailure {
        PeerFailure {
            kind: FailureKind::Stuck,
            message: line.into(),
        }
    }
}

/// The processes of one job, as seen from one of them. Every process must
/// make the same calls in the same order (they are collective); each call
/// returns when its part is done or with the job's first failure.
///
/// `Sync`: the runner's watchdog thread publishes progress and looks for
/// the job's failure while the main thread is inside a collective.
pub trait Bootstrap: Sync {
    /// This process's rank, `0..world_size()`.
    fn rank(&self) -> usize;
    /// Number of processes.
    fn world_size(&self) -> usize;
    /// Rank 0 passes `Some(data)`; every process returns rank 0's data.
    fn broadcast(&self, data: Option<Vec<u8>>) -> Result<Vec<u8>, PeerFailure>;
    /// Rank 0 gets every process's data indexed by rank; the others get
    /// `None` (and do not wait for rank 0).
    fn gather(&self, data: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, PeerFailure>;
    /// Every process gets every process's data indexed by rank.
    fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>, PeerFailure>;

    /// Publishes where this process is ([`Progress`]); cheap (one atomic
    /// store), so the timed loop may call it at its edges. Implementations
    /// carry it to rank 0 (e.g. in heartbeats). Default: not carried.
    fn publish_progress(&self, _progress: Progress) {}

    /// Rank 0 only: every rank's last published progress and how long it
    /// has stayed the same, indexed by rank. `None` on other ranks, or
    /// where the job keeps no such table.
    fn progress_of_all(&self) -> Option<Vec<RankProgress>> {
        None
    }

    /// Ranks other than 0: rank 0's last progress as its heartbeats
    /// carried it, and whether they still arrive (how a rank learns that
    /// rank 0, which names everyone else, is itself stopped). `None` on
    /// rank 0, or where the job keeps no such thing.
    fn root_progress(&self) -> Option<RankProgress> {
        None
    }

    /// Stops the whole job with `failure` (its kind, and one line naming
    /// who is at fault): every process's pending and later calls fail with
    /// it, and [`Bootstrap::failure`] returns it, kind and all. Default:
    /// nothing to tell.
    fn abort_job(&self, _failure: &PeerFailure) {}

    /// The job's first failure, if one has happened (never blocks). Lets a
    /// process stuck outside the control plane (inside a collective) learn
    /// that the job is over. Default: none known.
    fn failure(&self) -> Option<PeerFailure> {
        None
    }

    /// Every process gets the element-wise largest of every process's
    /// `values` (each process passes as many). A gather to rank 0 and a
    /// broadcast of the answer: the bytes rank 0 moves grow with the
    /// world, not with its square as an all_gather's do (there rank 0
    /// sends every part to every process: 4096 processes' 16 bytes make
    /// 200 MB).
    fn all_max(&self, values: &[f64]) -> Result<Vec<f64>, PeerFailure> {
        let answer = match self.gather(f64_bytes(values))? {
            Some(parts) => {
                let mut max = values.to_vec();
                for (rank, part) in parts.iter().enumerate() {
                    let theirs = bytes_f64(part, values.len()).ok_or_else(|| {
                        PeerFailure::new(format!(
                            "all_max: process {rank} sent {} bytes for {} values (processes made different calls)",
                            part.len(),
                            values.len()
                        ))
                    })?;
                    for (m, t) in max.iter_mut().zip(theirs) {
                        *m = m.max(t);
                    }
                }
                Some(f64_bytes(&max))
            }
            None => None,
        };
        let max = self.broadcast(answer)?;
        bytes_f64(&max, values.len()).ok_or_else(|| {
            PeerFailure::new(format!(
                "all_max: rank 0 answered {} bytes for {} values (processes made different calls)",
                max.len(),
                values.len()
            ))
        })
    }
}

fn f64_bytes(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// `n` values from their bytes; `None` if there are not exactly `n`.
fn bytes_f64(bytes: &[u8], n: usize) -> Option<Vec<f64>> {
    (bytes.len() == 8 * n).then(|| {
        bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    })
}

/// A job of one process: every call returns at once with this process's
/// own data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SingleProcess;

impl Bootstrap for SingleProcess {
    fn rank(&self) -> usize {
        0
    }
    fn world_size(&self) -> usize {
        1
    }
    fn broadcast(&self, data: Option<Vec<u8>>) -> Result<Vec<u8>, PeerFailure> {
        data.ok_or_else(|| {
            PeerFailure::new("broadcast: rank 0 must pass the data (a bug in the caller)")
        })
    }
    fn gather(&self, data: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, PeerFailure> {
        Ok(Some(vec![data]))
    }
    fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>, PeerFailure> {
        Ok(vec![data])
    }
}

/// Rank 0 of a job of two processes, the other one played by the test:
/// gathers and all_gathers return this process's part and then `peer`
/// (or this process's part again), broadcasts what rank 0 passes, and
/// `failure()` says `failure`. A test aid for code that meets its peers
/// through a [`Bootstrap`]; not a job.
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct TwoProcesses {
    /// The other process's part; `None`: the same as this process's.
    pub peer: Option<Vec<u8>>,
    /// The job's failure, as the other process's side would report it.
    pub failure: Option<PeerFailure>,
}

impl Bootstrap for TwoProcesses {
    fn rank(&self) -> usize {
        0
    }
    fn world_size(&self) -> usize {
        2
    }
    fn broadcast(&self, data: Option<Vec<u8>>) -> Result<Vec<u8>, PeerFailure> {
        Ok(data.unwrap_or_default())
    }
    fn gather(&self, data: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, PeerFailure> {
        Ok(Some(self.all_gather(data)?))
    }
    fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>, PeerFailure> {
        let peer = self.peer.clone().unwrap_or_else(|| data.clone());
        Ok(vec![data, peer])
    }
    fn failure(&self) -> Option<PeerFailure> {
        self.failure.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_world_of_one_returns_its_own_data() {
        let one: &dyn Bootstrap = &SingleProcess;
        assert_eq!((one.rank(), one.world_size()), (0, 1));
        assert_eq!(one.broadcast(Some(vec![1, 2])).unwrap(), vec![1, 2]);
        assert_eq!(one.gather(vec![3]).unwrap(), Some(vec![vec![3]]));
        assert_eq!(one.all_gather(vec![4]).unwrap(), vec![vec![4]]);
    }

    #[test]
    fn all_max_is_the_largest_of_each_value_over_the_processes() {
        assert_eq!(SingleProcess.all_max(&[1.5, -2.0]).unwrap(), [1.5, -2.0]);
        let two = |peer: &[f64]| TwoProcesses {
            peer: Some(f64_bytes(peer)),
            failure: None,
        };
        assert_eq!(two(&[0.5, 7.0]).all_max(&[1.5, -2.0]).unwrap(), [1.5, 7.0]);
        let short = two(&[0.5]);
        let e = short.all_max(&[1.5, -2.0]).unwrap_err();
        assert!(
            e.to_string()
                .contains("process 1 sent 8 bytes for 2 values"),
            "{e}"
        );
    }

    #[test]
    fn rank_0_without_data_is_a_caller_bug_not_a_panic() {
        let e = SingleProcess.broadcast(None).unwrap_err();
        assert!(e.to_string().contains("rank 0 must pass the data"), "{e}");
    }
}
