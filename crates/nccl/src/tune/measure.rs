//! [`NcclMeasurer`]: `collbench_tune::Measurer` on the NCCL backend, one
//! process driving all its local GPUs; under a launcher every process
//! runs one, in lock step (`collbench_tune::lockstep`), each communicator
//! spanning every process's GPUs.
//!
//! Each candidate maps to the communicator it needs ([`CommKey`]: channel
//! count and CTA policy through `ncclConfig_t`, registration mode through
//! the backend's `-R` modes) and, where it forces an algorithm and
//! protocol, to an override in collbench's tuner plugin set only around
//! its own repeat. Communicators (each an [`NcclBackend`] with its
//! buffers) are created on first use and kept, so default and candidate
//! live side by side and interleaving costs nothing. A repeat is the
//! backend's own timed loop ([`NcclBackend::time_bare`]).

#![forbid(unsafe_code)]

use super::config::CommConfig;
use crate::tuner::{nccl_func, TunerPlugin};
use crate::{NcclBackend, NcclOptions};
use collbench_core::{Bootstrap, Collective, DataType, ReduceOp};
use collbench_runner::{Backend, BackendError, CaseSpec};
use collbench_tune::{
    AlgoProto, Algorithm, Case, CtaPolicy, MeasureError, Measured, Measurer, Protocol,
    Registration, Sample, Setting, TunerAxis,
};
use std::collections::HashMap;
use std::time::Instant;

/// Untimed iterations before each repeat: the candidate's communicator
/// was idle while the other member of the pair ran.
const WARMUP: u32 = 2;

/// Bytes a repeat's operations rotate through unless COLLBENCH_TUNE_SPAN
/// says otherwise: well above the L2 of today's GPUs (50-60 MB on H100 and
/// H200), so no repeat measures an L2-resident copy.
///
/// Why: with every iteration reusing the same buffers, a 16 MiB case sits
/// in L2 and its time depends on where each process's buffers landed. On
/// one H200, NCCL's default spelled out (`NCCL_BUFFSIZE=4194304`, measured
/// in a child process) came out 4-7% "faster" than the default in 2 of 3
/// tune runs; rotating through 256 MiB took the spread between processes
/// under 2% (no false gain in 2 of 2 runs), and tune's 16 MiB time became
/// `run`'s (11.0 us against 6.8 us): bench/results/h200x1/session4/tune-bias.
pub const DEFAULT_SPAN: u64 = 256 << 20;

/// COLLBENCH_TUNE_SPAN (a size; `0` = the case's own size, no rotation),
/// else [`DEFAULT_SPAN`]; never below the case's size.
fn span_of(case_bytes: u64) -> u64 {
    let span = std::env::var("COLLBENCH_TUNE_SPAN")
        .ok()
        .and_then(|v| collbench_core::size::parse_size(&v).ok())
        .unwrap_or(DEFAULT_SPAN);
    span.max(case_bytes)
}

/// What distinguishes one communicator (and its buffers) from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommKey {
    pub config: CommConfig,
    /// Backend registration (`-R 0/1/2`).
    pub register: Registration,
}

impl CommKey {
    /// The communicator `setting` runs on.
    pub fn of(setting: &Setting) -> CommKey {
        CommKey {
            config: CommConfig {
                channels: setting.channels,
                cta_policy: (setting.cta_policy != CtaPolicy::Default)
                    .then(|| setting.cta_policy.nccl_value()),
            },
            register: setting.registration,
        }
    }
}

/// The algorithm/protocol pair `setting` forces, as cost table indices.
pub fn forced_pair(setting: &Setting) -> Result<Option<(i32, i32)>, MeasureError> {
    match (setting.algorithm, setting.protocol) {
        (None, None) => Ok(None),
        (Some(a), Some(p)) => Ok(Some((a.nccl_id(), p.nccl_id()))),
        _ => Err(MeasureError::Unsupported(
            "NCCL's tuner interface forces an algorithm and a protocol together".into(),
        )),
    }
}

/// Whether a repeat under a forced pair measured the pair: NCCL must have
/// asked the plugin (`calls` rose) and followed it on every call
/// (`rejected` did not rise).
pub fn check_forced(
    op: Collective,
    bytes: u64,
    pair: (i32, i32),
    calls: u64,
    rejected: u64,
) -> Result<(), MeasureError> {
    if calls == 0 {
        return Err(MeasureError::Unsupported(
            "NCCL did not call collbench's tuner plugin (NCCL before 2.28, or it failed to load it; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING says why)".into(),
        ));
    }
    if rejected > 0 {
        let name = match (
            Algorithm::ALL.get(pair.0 as usize),
            Protocol::ALL.get(pair.1 as usize),
        ) {
            (Some(a), Some(p)) => format!("{}/{}", a.csv_name(), p.csv_name()),
            _ => format!("{}/{}", pair.0, pair.1),
        };
        return Err(MeasureError::Unsupported(format!(
            "NCCL does not offer {name} for {op} at {bytes} bytes here"
        )));
    }
    Ok(())
}

/// The NCCL measurer: every local GPU of this process one rank.
pub struct NcclMeasurer<'a> {
    opts: NcclOptions,
    control: &'a dyn Bootstrap,
    plugin: TunerPlugin,
    /// The default communicator, made at construction.
    default: NcclBackend,
    /// Candidates' communicators, made on first use, in the order made:
    /// the same order in every process (they are made in the search's
    /// order), so they are also destroyed in the same order everywhere
    /// (a map's order differs from process to process).
    others: Vec<(CommKey, NcclBackend)>,
    /// Communicators NCCL refused to create: the candidates that need
    /// them are unsupported.
    refused: HashMap<CommKey, String>,
}

impl<'a> NcclMeasurer<'a> {
    /// Creates the default communicator (plain, unregistered) over this
    /// process's GPUs. The tuner plugin must be installed already, before
    /// any communicator exists.
    pub fn new(
        opts: &NcclOptions,
        control: &'a dyn Bootstrap,
        plugin: TunerPlugin,
    ) -> Result<NcclMeasurer<'a>, BackendError> {
        let mut opts = opts.clone();
        opts.nccl_only.registration = Registration::None;
        opts.explain = false;
        // No rules: otherwise the plugin would read COLLBENCH_TUNER_CONFIG
        // or NCCL_TUNER_CONFIG_FILE at the first communicator, and "the
        // default" would run someone's tuning.
        plugin.clear_config();
        plugin.clear_override();
        let default = NcclBackend::new(&opts, control)?;
        Ok(NcclMeasurer {
            opts,
            control,
            plugin,
            default,
            others: Vec::new(),
            refused: HashMap::new(),
        })
    }

    /// How many communicators it holds (the default's and the
    /// candidates'): each takes time to destroy when it ends.
    pub fn communicators(&self) -> usize {
        1 + self.others.len()
    }

    /// Ranks in the communicator.
    pub fn world_size(&self) -> usize {
        self.default.world_size()
    }

    /// The default communicator, for the report header.
    pub fn backend(&self) -> &NcclBackend {
        &self.default
    }

    /// Creates, ahead of the search, every communicator `settings` need,
    /// and returns the wall time it took (seconds). Without this, the
    /// first repeat of each candidate would carry its communicator's setup
    /// (seconds), and the search, which predicts a pair's cost from the
    /// dearest so far, would think every later pair that dear. Refusals
    /// are kept: those candidates come back unsupported.
    pub fn prepare<'s>(&mut self, settings: impl IntoIterator<Item = &'s Setting>) -> f64 {
        let start = Instant::now();
        for s in settings {
            if s.env.is_empty() {
                let _ = self.backend_for(CommKey::of(s));
            }
        }
        start.elapsed().as_secs_f64()
    }

    fn backend_for(&mut self, key: CommKey) -> Result<&mut NcclBackend, MeasureError> {
        if key == CommKey::of(&Setting::default()) {
            return Ok(&mut self.default);
        }
        if let Some(why) = self.refused.get(&key) {
            return Err(MeasureError::Unsupported(why.clone()));
        }
        let made = self.others.iter().position(|(k, _)| *k == key);
        let at = match made {
            Some(at) => at,
            None => {
                let mut opts = self.opts.clone();
                opts.nccl_only.registration = key.register;
                match NcclBackend::with_config(&opts, self.control, &key.config) {
                    Ok(b) => {
                        self.others.push((key, b));
                        self.others.len() - 1
                    }
                    Err(e) => {
                        let why = format!("NCCL cannot create this communicator: {e}");
                        self.refused.insert(key, why.clone());
                        return Err(MeasureError::Unsupported(why));
                    }
                }
            }
        };
        Ok(&mut self.others[at].1)
    }
}

/// The case as the backend runs it: float sum, out of place, root 0, the
/// size as nccl-tests' `size` column.
fn case_spec(case: &Case, world_size: usize) -> CaseSpec {
    let dtype = DataType::Float;
    CaseSpec {
        collective: case.op,
        dtype,
        redop: ReduceOp::Sum,
        root: 0,
        counts: case.op.counts(case.bytes, dtype.size_bytes(), world_size),
        in_place: false,
        world_size,
    }
}

fn measure_error(e: BackendError) -> MeasureError {
    match e {
        BackendError::Unsupported(m) => MeasureError::Unsupported(m),
        e => MeasureError::Failed(e.to_string()),
    }
}

impl Measurer for NcclMeasurer<'_> {
    fn measure(&mut self, setting: &Setting, case: &Case, iters: u32) -> Measured {
        let start = Instant::now();
        if !setting.env.is_empty() {
            return Err(MeasureError::Unsupported(
                "NCCL reads NCCL_* variables once per process: such a setting needs a child process, which collbench tune does not run yet".into(),
            ));
        }
        let pair = forced_pair(setting)?;
        let coll = nccl_func(case.op);
        if pair.is_some() && coll.is_none() {
            return Err(MeasureError::Unsupported(format!(
                "NCCL's tuner interface does not cover {}",
                case.op
            )));
        }
        let plugin = self.plugin.clone();
        let world_size = self.world_size();
        let spec = case_spec(case, world_size);
        let key = CommKey::of(setting);
        let backend = self.backend_for(key)?;
        if let Some((a, p)) = pair {
            plugin.set_override(coll, Some((a, p)), 0);
        }
        let before = plugin.counters();
        let timed = backend.time_bare(&spec, WARMUP, iters, span_of(case.bytes));
        let after = plugin.counters();
        if pair.is_some() {
            plugin.clear_override();
        }
        let secs = match timed.map_err(measure_error) {
            // A candidate's own communicator failing (an NCCL error, a
            // timeout that aborted it) rules out that candidate, not the
            // search; the default's failure ends the search.
            Err(MeasureError::Failed(why)) if key != CommKey::of(&Setting::default()) => {
                let why = format!("failed on its communicator: {why}");
                self.others.retain(|(k, _)| *k != key);
                self.refused.insert(key, why.clone());
                return Err(MeasureError::Unsupported(why));
            }
            r => r?,
        };
        if let Some(pair) = pair {
            check_forced(
                case.op,
                case.bytes,
                pair,
                after.calls - before.calls,
                after.rejected - before.rejected,
            )?;
        }
        let algo_proto = coll.and_then(|c| plugin.last_choice(c)).and_then(|c| {
            Some(AlgoProto {
                algorithm: *Algorithm::ALL.get(usize::try_from(c.algo).ok()?)?,
                protocol: *Protocol::ALL.get(usize::try_from(c.proto).ok()?)?,
            })
        });
        Ok(Sample {
            time_us: secs * 1e6,
            cost_us: start.elapsed().as_secs_f64() * 1e6,
            algo_proto,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_knob_lands_on_its_communicator() {
        let d = CommKey::of(&Setting::default());
        assert!(d.config.is_default());
        assert_eq!(d.register, Registration::None);
        let ch = CommKey::of(&Setting {
            channels: Some(64),
            ..Setting::default()
        });
        assert_eq!(ch.config.channels, Some(64));
        let ap = Setting {
            algorithm: Some(Algorithm::Ring),
            protocol: Some(Protocol::Ll128),
            ..Setting::default()
        };
        // Algorithm/protocol candidates share the default communicator.
        assert_eq!(CommKey::of(&ap), d);
        assert_eq!(forced_pair(&ap).unwrap(), Some((1, 1)));
        let r2 = CommKey::of(&Setting {
            registration: Registration::Symmetric,
            ..Setting::default()
        });
        assert_eq!(
            (r2.config, r2.register),
            (CommConfig::default(), Registration::Symmetric)
        );
        let cta = CommKey::of(&Setting {
            cta_policy: CtaPolicy::Zero,
            ..Setting::default()
        });
        assert_eq!(cta.config.cta_policy, Some(2));
    }

    #[test]
    fn half_a_pair_is_unsupported() {
        let s = Setting {
            algorithm: Some(Algorithm::Tree),
            ..Setting::default()
        };
        assert!(matches!(forced_pair(&s), Err(MeasureError::Unsupported(_))));
        assert_eq!(forced_pair(&Setting::default()).unwrap(), None);
    }

    #[test]
    fn a_rejected_or_unseen_override_is_not_a_sample() {
        let op = Collective::AllReduce;
        assert!(check_forced(op, 1024, (4, 2), 10, 0).is_ok());
        let e = check_forced(op, 1024, (4, 2), 10, 3).unwrap_err();
        assert_eq!(
            e,
            MeasureError::Unsupported(
                "NCCL does not offer nvls/simple for all_reduce at 1024 bytes here".into()
            )
        );
        let e = check_forced(op, 1024, (4, 2), 0, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("did not call collbench's tuner plugin"), "{e}");
    }

    #[test]
    fn cases_are_float_sums_of_the_size_column() {
        let s = case_spec(
            &Case {
                op: Collective::AllGather,
                bytes: 1 << 20,
            },
            2,
        );
        assert_eq!(s.size_bytes(), 1 << 20);
        assert_eq!(
            (s.dtype, s.in_place, s.world_size),
            (DataType::Float, false, 2)
        );
    }
}
