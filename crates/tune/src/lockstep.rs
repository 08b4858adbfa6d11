//! [`Lockstep`]: the [`Measurer`] of a `tune` job of several processes.
//! Every process runs the same search; after each repeat of its own part
//! the processes agree on one result (rank 0 gathers every process's,
//! combines them and broadcasts the answer), so every search sees the
//! same samples, takes the same decisions and makes the same collective
//! calls in the same order.
//!
//! The agreed result: the slowest time and the dearest cost when every
//! process measured (a collective takes as long as its slowest rank), else
//! the first failure, else the first "unsupported", each naming its rank.
//! A Ctrl-C in any process stops every search at the same repeat
//! (the agreed stop flag of [`Lockstep::new`]). A failure of the processes to talk (a peer
//! died or went silent) is kept ([`Lockstep::peer_failure`]) for the
//! caller's usual line and exit, and ends the search as failed.

use crate::measure::{MeasureError, Measurer, Sample};
use crate::setting::{Case, Setting};
use collbench_core::{Bootstrap, PeerFailure};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};

/// What one process sends after a repeat, and what rank 0 answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Word {
    result: Result<Sample, MeasureError>,
    stop: bool,
}

/// The measurer of one process of a multi-process `tune`.
pub struct Lockstep<'a> {
    inner: &'a mut dyn Measurer,
    control: &'a dyn Bootstrap,
    /// Set by this process's Ctrl-C handler.
    local_stop: &'a AtomicBool,
    /// Set when any process stopped: the search polls this one.
    agreed_stop: &'a AtomicBool,
    peer_failure: Option<PeerFailure>,
}

impl<'a> Lockstep<'a> {
    /// Measures with `inner` and agrees over `control`. `local_stop` is
    /// this process's Ctrl-C flag; `agreed_stop`, the flag to give the
    /// search, is set in every process after the repeat in which any
    /// process was stopped.
    pub fn new(
        inner: &'a mut dyn Measurer,
        control: &'a dyn Bootstrap,
        local_stop: &'a AtomicBool,
        agreed_stop: &'a AtomicBool,
    ) -> Lockstep<'a> {
        Lockstep {
            inner,
            control,
            local_stop,
            agreed_stop,
            peer_failure: None,
        }
    }

    /// The failure of the processes to talk, if one ended the search.
    pub fn peer_failure(&self) -> Option<&PeerFailure> {
        self.peer_failure.as_ref()
    }

    fn agree(&self, own: Word) -> Result<Word, PeerFailure> {
        let bytes = serde_json::to_vec(&own).expect("a Word serializes");
        let answer = match self.control.gather(bytes)? {
            Some(parts) => Some(combine(&parts)?),
            None => None,
        };
        let answer = self.control.broadcast(answer)?;
        serde_json::from_slice(&answer).map_err(|e| {
            PeerFailure::new(format!(
                "tune: rank 0's answer is not a result ({e}): processes made different calls"
            ))
        })
    }
}

/// Rank 0's answer from every process's word, indexed by rank.
fn combine(parts: &[Vec<u8>]) -> Result<Vec<u8>, PeerFailure> {
    let mut words = Vec::with_capacity(parts.len());
    for (rank, p) in parts.iter().enumerate() {
        let w: Word = serde_json::from_slice(p).map_err(|e| {
            PeerFailure::new(format!(
                "tune: process {rank} sent no result ({e}): processes made different calls"
            ))
        })?;
        words.push(w);
    }
    let stop = words.iter().any(|w| w.stop);
    let result = agreed(&words);
    Ok(serde_json::to_vec(&Word { result, stop }).expect("a Word serializes"))
}

/// The first failure, else the first "unsupported", each naming its
/// rank; else the slowest time and dearest cost (rank 0's algorithm).
fn agreed(words: &[Word]) -> Result<Sample, MeasureError> {
    let on = |rank: usize, m: &str| format!("rank {rank}: {m}");
    let errors = words
        .iter()
        .enumerate()
        .filter_map(|(r, w)| w.result.as_ref().err().map(|e| (r, e)));
    let mut unsupported = None;
    for (rank, e) in errors {
        match e {
            MeasureError::Failed(m) => return Err(MeasureError::Failed(on(rank, m))),
            MeasureError::Unsupported(m) => {
                unsupported.get_or_insert_with(|| MeasureError::Unsupported(on(rank, m)));
            }
        }
    }
    if let Some(e) = unsupported {
        return Err(e);
    }
    let samples: Vec<&Sample> = words
        .iter()
        .filter_map(|w| w.result.as_ref().ok())
        .collect();
    let mut out = *samples[0];
    for s in &samples[1..] {
        out.time_us = out.time_us.max(s.time_us);
        out.cost_us = out.cost_us.max(s.cost_us);
    }
    Ok(out)
}

impl Lockstep<'_> {
    /// This process's result of a repeat, agreed with every process's.
    fn settle(&mut self, result: Result<Sample, MeasureError>) -> Result<Sample, MeasureError> {
        let own = Word {
            result,
            stop: self.local_stop.load(Ordering::SeqCst),
        };
        match self.agree(own) {
            Ok(w) => {
                if w.stop {
                    self.agreed_stop.store(true, Ordering::SeqCst);
                }
                w.result
            }
            Err(f) => {
                let why = f.message.clone();
                self.peer_failure = Some(f);
                Err(MeasureError::Failed(why))
            }
        }
    }
}

impl Measurer for Lockstep<'_> {
    fn measure(
        &mut self,
        setting: &Setting,
        case: &Case,
        iters: u32,
    ) -> Result<Sample, MeasureError> {
        let own = self.inner.measure(setting, case, iters);
        self.settle(own)
    }

    fn measure_in_pair(
        &mut self,
        setting: &Setting,
        partner: &Setting,
        case: &Case,
        iters: u32,
    ) -> Result<Sample, MeasureError> {
        let own = self.inner.measure_in_pair(setting, partner, case, iters);
        self.settle(own)
    }
}

#[cfg(test)]
mod tests;
