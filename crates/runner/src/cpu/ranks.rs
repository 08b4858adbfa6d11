//! Starting the rank threads: a fixed limit on their number, and no hang
//! when the system refuses a thread (the ones already started would wait at
//! the first barrier for a peer that never comes).

use crate::backend::BackendError;
use crate::shortfall::Shortfall;
use std::sync::{Condvar, Mutex};

/// Most ranks the CPU backend runs: each rank is a thread of this process,
/// and every collective waits for all of them, so beyond a few thousand a
/// run mostly measures the scheduler (and systems refuse threads:
/// `--ranks 40000` hit the limit on a 24 GiB host).
pub const MAX_RANKS: usize = 4096;

/// One line for a rank count outside 1..=[`MAX_RANKS`], if it is.
pub fn check_ranks(ranks: usize) -> Result<(), String> {
    if ranks > MAX_RANKS {
        return Err(format!(
            "--ranks {ranks} is more than the CPU backend's limit of {MAX_RANKS} rank threads: use --ranks {MAX_RANKS} or fewer (or a GPU backend for larger jobs)"
        ));
    }
    Ok(())
}

/// Held by started threads until every rank has a thread (`Some(true)`)
/// or one could not be started (`Some(false)`).
struct Gate {
    open: Mutex<Option<bool>>,
    cv: Condvar,
}

impl Gate {
    fn decide(&self, go: bool) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = Some(go);
        self.cv.notify_all();
    }

    fn wait(&self) -> bool {
        let mut g = self.open.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(go) = *g {
                return go;
            }
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Runs `f(rank)` for every rank in `0..n` on its own scoped thread, all
/// starting together, and returns the results in rank order. If a thread
/// cannot be started, none of them runs `f` and the error says so.
pub fn run_ranks<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync) -> Result<Vec<R>, BackendError> {
    start(n, f, |_| None)
}

/// [`run_ranks`] with a stack size per rank (`None`: the default), so tests
/// can make the system refuse one thread.
fn start<R: Send>(
    n: usize,
    f: impl Fn(usize) -> R + Sync,
    stack_of: impl Fn(usize) -> Option<usize>,
) -> Result<Vec<R>, BackendError> {
    check_ranks(n).map_err(BackendError::Unsupported)?;
    let gate = Gate {
        open: Mutex::new(None),
        cv: Condvar::new(),
    };
    let cpus = affinity::allowed();
    let pin = n <= cpus.len() && std::env::var("COLLBENCH_CPU_PIN").as_deref() != Ok("0");
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(n);
        let mut refused = None;
        for r in 0..n {
            let (gate, f, cpus) = (&gate, &f, &cpus);
            let mut builder = std::thread::Builder::new().name(format!("rank {r}"));
            if let Some(bytes) = stack_of(r) {
                builder = builder.stack_size(bytes);
            }
            let started = builder.spawn_scoped(s, move || {
                if pin {
                    affinity::pin(cpus[r]);
                }
                gate.wait().then(|| f(r))
            });
            match started {
                Ok(h) => handles.push(h),
                Err(e) => {
                    refused = Some(Shortfall::RankThread {
                        rank: r,
                        ranks: n,
                        cause: e.to_string(),
                    });
                    break;
                }
            }
        }
        gate.decide(refused.is_none());
        let results: Vec<Option<R>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        match refused {
            Some(shortfall) => Err(BackendError::OutOfMemory(shortfall)),
            None => Ok(results.into_iter().flatten().collect()),
        }
    })
}

/// Pinning each rank to a CPU of its own, when there are enough: fresh
/// threads otherwise start wherever the scheduler puts them, often two on
/// one core, and a short timed loop ends before it spreads them out.
#[cfg(target_os = "linux")]
mod affinity {
    /// CPUs this process may run on.
    pub fn allowed() -> Vec<usize> {
        // SAFETY: cpu_set_t is plain bits (all-zero is a valid empty set),
        // and sched_getaffinity writes at most the size we pass.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return Vec::new();
            }
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect()
        }
    }

    /// Binds the calling thread to `cpu` (best effort: a refusal leaves
    /// it where it is).
    pub fn pin(cpu: usize) {
        // SAFETY: as above; sched_setaffinity only reads the set.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod affinity {
    pub fn allowed() -> Vec<usize> {
        Vec::new()
    }
    pub fn pin(_cpu: usize) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_in_rank_order() {
        let out = run_ranks(5, |r| r * 10).unwrap();
        assert_eq!(out, vec![0, 10, 20, 30, 40]);
    }

    #[test]
    fn a_refused_thread_is_an_error_not_a_hang() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let ran = AtomicUsize::new(0);
        // A 64 TiB stack for rank 3: no system maps that.
        let e = start(
            6,
            |_| ran.fetch_add(1, Ordering::SeqCst),
            |r| (r == 3).then_some(1 << 46),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("cannot start rank thread 3 of 6"), "{e}");
        assert_eq!(ran.load(Ordering::SeqCst), 0, "no rank may run alone");
    }

    #[test]
    fn too_many_ranks_is_an_error_naming_the_limit() {
        let e = run_ranks(MAX_RANKS + 1, |r| r).unwrap_err().to_string();
        assert!(e.contains("--ranks 4097"), "{e}");
        assert!(e.contains("use --ranks 4096 or fewer"), "{e}");
    }
}
