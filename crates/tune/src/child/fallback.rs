//! The parent's measurer: in-process settings on the in-process measurer,
//! environment settings in the children.

use super::children::{Children, Key, Role};
use super::Request;
use crate::measure::{InPair, MeasureError, Measured, Measurer};
use crate::setting::{Case, Setting};
use std::time::Instant;

/// The parent's [`Measurer`]: settings without `env` go to the in-process
/// measurer; a setting with `env` goes to its child, and the default
/// measured as its partner goes to that candidate's own default child
/// ([`Children`]), so both members of the pair are measured alike.
pub struct EnvFallback<'a> {
    inner: &'a mut dyn Measurer,
    children: Children,
    /// Under a launcher: a child's failure ends only its candidate
    /// ([`MeasureError::CandidateFailed`]).
    across: bool,
}

impl<'a> EnvFallback<'a> {
    /// Measures in process with `inner`, environment candidates in
    /// `children` (started already, or on first use).
    pub fn new(inner: &'a mut dyn Measurer, children: Children) -> EnvFallback<'a> {
        EnvFallback {
            inner,
            children,
            across: false,
        }
    }

    /// The same for one process of a job under a launcher, whose children
    /// form child jobs with the other processes' children: a child that
    /// dies, hangs or says something else fails its candidate alone
    /// ([`MeasureError::CandidateFailed`]), which the processes then end
    /// everywhere ([`Measurer::candidate_ended`]), never the search.
    pub fn across(inner: &'a mut dyn Measurer, children: Children) -> EnvFallback<'a> {
        EnvFallback {
            across: true,
            ..EnvFallback::new(inner, children)
        }
    }

    fn in_child(&mut self, key: Key, setting: &Setting, case: &Case, iters: u32) -> Measured {
        let start = Instant::now();
        let req = Request {
            setting: Setting {
                env: Vec::new(),
                ..setting.clone()
            },
            case: *case,
            iters,
        };
        let across = self.across;
        let mut sample = self
            .children
            .child(key)
            .and_then(|c| c.measure(&req))
            .map_err(|e| candidate_only(e, across, start))?;
        // The parent's wall time: the pipe round trip is part of the cost.
        sample.cost_us = sample.cost_us.max(start.elapsed().as_secs_f64() * 1e6);
        Ok(sample)
    }
}

/// Under a launcher (`across`), a child's failure is its candidate's
/// alone: it ends that candidate, charged the wall time since `start`,
/// not the search.
fn candidate_only(e: MeasureError, across: bool, start: Instant) -> MeasureError {
    match e {
        MeasureError::Failed(reason) if across => MeasureError::CandidateFailed {
            reason,
            cost_us: start.elapsed().as_secs_f64() * 1e6,
        },
        e => e,
    }
}

impl Measurer for EnvFallback<'_> {
    fn measure(&mut self, setting: &Setting, case: &Case, iters: u32) -> Measured {
        if setting.env.is_empty() {
            self.inner.measure(setting, case, iters)
        } else {
            let key = Key {
                env: setting.env.clone(),
                role: Role::Candidate,
            };
            self.in_child(key, setting, case, iters)
        }
    }

    fn measure_in_pair(&mut self, pair: InPair<'_>, case: &Case, iters: u32) -> Measured {
        if pair.setting.env.is_empty() && !pair.partner.env.is_empty() {
            let key = Key {
                env: pair.partner.env.clone(),
                role: Role::DefaultPartner,
            };
            self.in_child(key, pair.setting, case, iters)
        } else {
            self.measure(pair.setting, case, iters)
        }
    }

    fn candidate_ended(&mut self, candidate: &Setting, reason: &str) {
        if !candidate.env.is_empty() {
            self.children.end(&candidate.env, reason);
        }
    }

    /// A candidate's environment gets two fresh children
    /// ([`Children::renew`]); a setting measured in process has none.
    fn renew(&mut self, candidate: &Setting) -> Result<Option<f64>, MeasureError> {
        if candidate.env.is_empty() {
            return Ok(None);
        }
        let (across, start) = (self.across, Instant::now());
        self.children
            .renew(&candidate.env)
            .map(Some)
            .map_err(|e| candidate_only(e, across, start))
    }
}
