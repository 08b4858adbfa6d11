//! The child jobs' rendezvous ports under a launcher (docs/tune.md,
//! section 3): rank 0 picks free ones and every process learns them over
//! the parents' control plane, so that child `k` of every process meets
//! the others of child job `k` there; and how long a parent waits for a
//! child's answer.

use super::error::TuneError;
use collbench_core::Bootstrap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a parent waits for each answer of a child in a job of
/// several processes (`timeout_s` is the parents' control-plane
/// timeout): three quarters of it, at least a second. Parents that wait
/// for their children at most that long reach their agreement on the
/// round within the control plane's timeout of each other.
pub fn child_timeout(timeout_s: u64) -> Duration {
    Duration::from_millis((timeout_s * 750).max(1000))
}

/// `n` ports free on rank 0's host a moment ago, outside the OS's
/// ephemeral range where outgoing connections take theirs
/// ([`collbench_core::ports`]); a child job's rank 0 may still lose its
/// port to another process first, which fails that candidate alone.
fn free_ports(bind: &str, n: usize) -> std::io::Result<Vec<u16>> {
    collbench_core::ports::free_ports(bind, n)
}

/// Every process gets the `n` child jobs' ports rank 0 picked on `bind`.
pub fn agree_ports(control: &dyn Bootstrap, bind: &str, n: usize) -> Result<Vec<u16>, TuneError> {
    let picked = (control.rank() == 0).then(|| free_ports(bind, n));
    // Rank 0's failure is broadcast too, or the others would wait.
    let mine = picked
        .as_ref()
        .map(|p| serde_json::to_vec(&p.as_ref().ok()).unwrap_or_else(|_| b"null".to_vec()));
    let answer = control.broadcast(mine)?;
    if let Some(Err(e)) = picked {
        return Err(TuneError::Failed(format!(
            "collbench tune: cannot find free ports on {bind} for the child jobs: {e}"
        )));
    }
    match serde_json::from_slice::<Option<Vec<u16>>>(&answer) {
        Ok(Some(ports)) if ports.len() == n => Ok(ports),
        Ok(_) => Err(TuneError::Failed(
            "collbench tune: rank 0 found no free ports for the child jobs (see its output)".into(),
        )),
        Err(e) => Err(TuneError::Peer(format!(
            "rank 0's ports are unreadable ({e}): every process must run the same collbench"
        ))),
    }
}

/// The child jobs' ports by child number, shared by the parent's spawner
/// and its search: those agreed for the children started up front, then
/// two more agreed for each renewal of a candidate's children (fresh
/// ones, not kept from the start: a port held by no listener for minutes
/// may be any other socket's by then, NCCL's own included).
#[derive(Debug, Clone, Default)]
pub struct PortBook(Arc<Mutex<Vec<u16>>>);

impl PortBook {
    /// A book of the ports agreed for children `0..ports.len()`.
    pub fn new(ports: Vec<u16>) -> PortBook {
        PortBook(Arc::new(Mutex::new(ports)))
    }

    /// The ports of the next children, in their order.
    pub fn add(&self, ports: &[u16]) {
        if let Ok(mut book) = self.0.lock() {
            book.extend_from_slice(ports);
        }
    }

    /// Child `k`'s port, if one was agreed.
    pub fn get(&self, k: usize) -> Option<u16> {
        self.0.lock().ok().and_then(|b| b.get(k).copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_waits_below_the_parents_timeout() {
        assert_eq!(child_timeout(60), Duration::from_secs(45));
        assert_eq!(child_timeout(5), Duration::from_millis(3750));
        assert_eq!(child_timeout(1), Duration::from_secs(1));
    }

    #[test]
    fn free_ports_differ() {
        let ports = free_ports("127.0.0.1", 4).unwrap();
        let mut sorted = ports.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 4);
    }

    #[test]
    fn a_world_of_one_agrees_with_itself() {
        let ports = agree_ports(&collbench_core::SingleProcess, "127.0.0.1", 2).unwrap();
        assert_eq!(ports.len(), 2);
        let book = PortBook::new(ports.clone());
        book.add(&[7]);
        assert_eq!(
            (book.get(0), book.get(2), book.get(3)),
            (Some(ports[0]), Some(7), None)
        );
    }
}
