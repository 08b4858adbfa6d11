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
//! A candidate whose measurement failed on some rank where only it is at
//! fault (`MeasureError::CandidateFailed`: its child processes) is ended
//! on every rank with the reasons of all ranks ([`joint_reason`]), and the
//! measurer told so ([`Measurer::candidate_ended`]); the search goes on.
//! A Ctrl-C in any process stops every search at the same repeat
//! (the agreed stop flag of [`Lockstep::new`]). A failure of the processes to talk (a peer
//! died or went silent) is kept ([`Lockstep::peer_failure`]) for the
//! caller's usual line and exit, and ends the search as failed.

use crate::measure::{InPair, MeasureError, Measured, Measurer, Sample};
use crate::setting::{Case, Setting};
use collbench_core::{Bootstrap, PeerFailure};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};

/// What one process sends after a repeat, and what rank 0 answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Word {
    result: Measured,
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
    on_ended: Option<EndedHook<'a>>,
}

/// Told of every candidate the processes agreed to end, with the agreed
/// reason (each time a request for it is answered so; see
/// [`Lockstep::on_candidate_ended`]).
pub type EndedHook<'a> = Box<dyn FnMut(&Setting, &str) + 'a>;

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
            on_ended: None,
        }
    }

    /// Calls `hook` whenever the processes agree that a candidate failed
    /// (a repeat or a renewal answered `MeasureError::CandidateFailed`),
    /// after the measurer let it go: the caller's place to say so.
    pub fn on_candidate_ended(mut self, hook: EndedHook<'a>) -> Lockstep<'a> {
        self.on_ended = Some(hook);
        self
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

/// The first failure, else the candidate's failures (all of them, see
/// [`joint_reason`]), else the first "unsupported", each naming its rank;
/// else the slowest time and dearest cost (rank 0's algorithm).
fn agreed(words: &[Word]) -> Measured {
    let on = |rank: usize, m: &str| format!("rank {rank}: {m}");
    let errors: Vec<(usize, &MeasureError)> = words
        .iter()
        .enumerate()
        .filter_map(|(r, w)| w.result.as_ref().err().map(|e| (r, e)))
        .collect();
    let mut unsupported = None;
    let mut candidate = Vec::new();
    for &(rank, e) in &errors {
        match e {
            MeasureError::Failed(m) => return Err(MeasureError::Failed(on(rank, m))),
            MeasureError::CandidateFailed { reason, .. } => candidate.push((rank, reason.as_str())),
            MeasureError::Unsupported(m) => {
                unsupported.get_or_insert_with(|| MeasureError::Unsupported(on(rank, m)));
            }
        }
    }
    if !candidate.is_empty() {
        // Every process charges the dearest one's wall time, failed or
        // not, as for a sample: their budgets stay equal.
        let cost_us = words
            .iter()
            .map(|w| match &w.result {
                Ok(s) => s.cost_us,
                Err(MeasureError::CandidateFailed { cost_us, .. }) => *cost_us,
                Err(_) => 0.0,
            })
            .fold(0.0, f64::max);
        return Err(MeasureError::CandidateFailed {
            reason: joint_reason(&candidate, words.len()),
            cost_us,
        });
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

/// How many distinct reasons a joint reason spells out.
const REASONS_SHOWN: usize = 3;

/// One reason from the ranks' own `(rank, reason)` in a job of `world`
/// ranks. The same text from every rank is already agreed (a candidate
/// that ended earlier answers with its agreed reason everywhere) and
/// stays as it is; otherwise each distinct text with the ranks that gave
/// it: where a child died on one host, its peers' children see only the
/// broken child job, and the dead one's own words say why.
pub fn joint_reason(reasons: &[(usize, &str)], world: usize) -> String {
    let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
    for &(rank, text) in reasons {
        match groups.iter_mut().find(|(t, _)| *t == text) {
            Some((_, ranks)) => ranks.push(rank),
            None => groups.push((text, vec![rank])),
        }
    }
    if let [(text, ranks)] = &groups[..] {
        if ranks.len() == world {
            return text.to_string();
        }
    }
    let mut parts: Vec<String> = groups
        .iter()
        .take(REASONS_SHOWN)
        .map(|(text, ranks)| {
            let list: Vec<String> = ranks.iter().map(usize::to_string).collect();
            let who = if ranks.len() == 1 { "rank" } else { "ranks" };
            format!("{who} {}: {text}", list.join(", "))
        })
        .collect();
    if groups.len() > REASONS_SHOWN {
        parts.push(format!("and {} more", groups.len() - REASONS_SHOWN));
    }
    parts.join("; ")
}

/// Agrees on the outcome of something every process did for each of the
/// same candidates (e.g. starting their child processes): `own[k]` is
/// this process's reason why candidate `k` failed, if it did. Every
/// process gets, for each candidate, the [`joint_reason`] of the ranks
/// where it failed (`None` where it failed nowhere).
pub fn agree_outcomes(
    control: &dyn Bootstrap,
    own: &[Option<String>],
) -> Result<Vec<Option<String>>, PeerFailure> {
    let bytes = serde_json::to_vec(own).expect("reasons serialize");
    let answer = match control.gather(bytes)? {
        Some(parts) => {
            let mut all = Vec::with_capacity(parts.len());
            for (rank, p) in parts.iter().enumerate() {
                let r: Vec<Option<String>> = serde_json::from_slice(p)
                    .ok()
                    .filter(|r: &Vec<Option<String>>| r.len() == own.len())
                    .ok_or_else(|| different_calls(rank))?;
                all.push(r);
            }
            Some(serde_json::to_vec(&combine_outcomes(&all)).expect("reasons serialize"))
        }
        None => None,
    };
    let answer = control.broadcast(answer)?;
    serde_json::from_slice(&answer).map_err(|_| different_calls(0))
}

fn different_calls(rank: usize) -> PeerFailure {
    PeerFailure::new(format!(
        "tune: process {rank} sent no candidate outcomes: processes made different calls"
    ))
}

/// Per candidate, the joint reason of the ranks (indexes of `parts`)
/// where it failed.
fn combine_outcomes(parts: &[Vec<Option<String>>]) -> Vec<Option<String>> {
    let n = parts.first().map_or(0, Vec::len);
    (0..n)
        .map(|k| {
            let failed: Vec<(usize, &str)> = parts
                .iter()
                .enumerate()
                .filter_map(|(rank, p)| p[k].as_deref().map(|m| (rank, m)))
                .collect();
            (!failed.is_empty()).then(|| joint_reason(&failed, parts.len()))
        })
        .collect()
}

impl Lockstep<'_> {
    /// This process's result of a repeat of `candidate` (or of the default
    /// as its partner), agreed with every process's. A candidate that
    /// failed anywhere is ended everywhere.
    fn settle(&mut self, candidate: &Setting, result: Measured) -> Measured {
        let own = Word {
            result,
            stop: self.local_stop.load(Ordering::SeqCst),
        };
        match self.agree(own) {
            Ok(w) => {
                if w.stop {
                    self.agreed_stop.store(true, Ordering::SeqCst);
                }
                if let Err(MeasureError::CandidateFailed { reason: why, .. }) = &w.result {
                    self.inner.candidate_ended(candidate, why);
                    if let Some(hook) = &mut self.on_ended {
                        hook(candidate, why);
                    }
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
    fn measure(&mut self, setting: &Setting, case: &Case, iters: u32) -> Measured {
        let own = self.inner.measure(setting, case, iters);
        self.settle(setting, own)
    }

    fn measure_in_pair(&mut self, pair: InPair<'_>, case: &Case, iters: u32) -> Measured {
        let own = self.inner.measure_in_pair(pair, case, iters);
        self.settle(pair.candidate(), own)
    }

    /// Every process renews its processes for `candidate` (the child jobs
    /// of an environment candidate, started afresh on every host), and
    /// they agree as on a repeat: the dearest wall time, or the candidate
    /// ended everywhere with every rank's reason. A setting measured in
    /// process renews nothing on any rank (it is the same setting on all),
    /// so that answer needs no agreement.
    fn renew(&mut self, candidate: &Setting) -> Result<Option<f64>, MeasureError> {
        let own = match self.inner.renew(candidate) {
            Ok(None) => return Ok(None),
            // The wall time travels as a repeat's would: the agreed answer
            // is the slowest process's.
            Ok(Some(us)) => Ok(Sample {
                time_us: us,
                cost_us: us,
                algo_proto: None,
            }),
            Err(e) => Err(e),
        };
        self.settle(candidate, own).map(|s| Some(s.cost_us))
    }
}

#[cfg(test)]
mod tests;
