//! [`SetupGuard`]: the watchdog's duty while a job of several processes
//! sets up its backend (NCCL creating communicators), before any run.
//!
//! On two emulated hosts on one H200 a rank SIGSTOPped during NCCL's setup
//! was named only by the control plane's `--timeout-s`, 59-62 s later, and
//! the survivors exited 4 (the backend's error). With the guard, a rank
//! unheard for the watchdog's deadline is named at once
//! ([`collbench_core::silent_setup`]), the job is stopped, and a process
//! whose setup does not return within the grace period ends with the line
//! (exit 3); a failure the control plane saw in the meantime ends it the
//! same way.

use crate::watch::Stop;
use crate::watchdog::Watchdog;
use collbench_core::silent_setup::silent_during_setup;
use collbench_core::{Bootstrap, PeerFailure};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Watches the job while this process sets up; dropping it (setup done,
/// whatever its result) ends the watch.
pub struct SetupGuard {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SetupGuard {
    /// Starts watching `control`'s job with `config`'s deadline, grace,
    /// announcement and last resort. A world of one needs no guard.
    pub fn start(control: Arc<dyn Bootstrap + Send + Sync>, config: &Watchdog) -> SetupGuard {
        let done = Arc::new(AtomicBool::new(false));
        let thread = (control.world_size() > 1).then(|| {
            let (done, config) = (done.clone(), config.clone());
            std::thread::Builder::new()
                .name("collbench-setup-guard".into())
                .spawn(move || guard(control.as_ref(), &config, &done))
                .ok()
        });
        SetupGuard {
            done,
            thread: thread.flatten(),
        }
    }
}

impl Drop for SetupGuard {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            // It sleeps parked: woken now, it sees `done` at once, so a
            // job's start-up waits no tick for it.
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// The guard's loop: returns once setup is done, or ends the process.
fn guard(control: &dyn Bootstrap, config: &Watchdog, done: &AtomicBool) {
    let tick = config.tick();
    let stop = loop {
        std::thread::park_timeout(tick);
        if done.load(Ordering::SeqCst) {
            return;
        }
        if let Some(f) = control.failure() {
            break Stop::from_failure(f);
        }
        let Some(deadline) = config.deadline else {
            continue;
        };
        let table = if control.rank() == 0 {
            control.progress_of_all()
        } else {
            control.root_progress().map(|root| vec![root])
        };
        if let Some(line) = table.and_then(|t| silent_during_setup(&t, deadline)) {
            control.abort_job(&PeerFailure::new(line.clone()));
            break Stop::Failed(line);
        }
    };
    if let Some(announce) = &config.announce {
        announce(&stop);
    }
    let until = Instant::now() + config.grace.unwrap_or(crate::watchdog::GRACE);
    while Instant::now() < until {
        if done.load(Ordering::SeqCst) {
            // Setup returned: the run (or its error) reports the failure.
            return;
        }
        std::thread::park_timeout(Duration::from_millis(20));
    }
    if let Some(last) = &config.last_resort {
        last(&stop);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::{Heard, RankProgress};
    use std::sync::mpsc;
    use std::sync::Mutex;

    /// Rank 1 of a job of two whose rank 0 stopped `silent` ago.
    struct RootSilent {
        silent: Duration,
    }

    impl Bootstrap for RootSilent {
        fn rank(&self) -> usize {
            1
        }
        fn world_size(&self) -> usize {
            2
        }
        fn broadcast(&self, data: Option<Vec<u8>>) -> Result<Vec<u8>, PeerFailure> {
            Ok(data.unwrap_or_default())
        }
        fn gather(&self, _: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, PeerFailure> {
            Ok(None)
        }
        fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>, PeerFailure> {
            Ok(vec![data.clone(), data])
        }
        fn root_progress(&self) -> Option<RankProgress> {
            Some(RankProgress {
                rank: 0,
                host: "n1".into(),
                progress: None,
                unchanged_for: self.silent,
                heard: Heard::Silent(self.silent),
            })
        }
    }

    fn config(tx: mpsc::Sender<Stop>) -> Watchdog {
        let tx = Mutex::new(tx);
        Watchdog {
            deadline: Some(Duration::from_secs(5)),
            grace: Some(Duration::from_millis(50)),
            last_resort: Some(Arc::new(move |s: &Stop| {
                let _ = tx.lock().unwrap().send(s.clone());
            })),
            ..Watchdog::default()
        }
    }

    #[test]
    fn a_rank_silent_during_setup_ends_a_setup_that_does_not_return() {
        let (tx, rx) = mpsc::channel();
        let control = Arc::new(RootSilent {
            silent: Duration::from_secs(7),
        });
        let _guard = SetupGuard::start(control, &config(tx));
        let stop = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(
            stop,
            Stop::Failed(
                "rank 0 (host n1) silent for 7 s while the job was setting up (stopped, hung or cut off)"
                    .into()
            )
        );
    }

    #[test]
    fn a_setup_that_returns_ends_the_guard_quietly() {
        let (tx, rx) = mpsc::channel();
        let control = Arc::new(RootSilent {
            silent: Duration::from_secs(1),
        });
        drop(SetupGuard::start(control, &config(tx)));
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    }
}
