//! collbench-tune: the engine of `collbench tune`, which finds NCCL
//! settings that beat NCCL's defaults on this machine, proves each gain with
//! an interval from interleaved repeats, and writes what production can
//! load (shell lines, a tuner CSV in the format of NCCL's example tuner).
//!
//! What is here: candidate settings ([`setting`]), the search over op and
//! size bands within a budget ([`search`]), the statistics engine shared
//! with `run -n auto` ([`stats`]), the result types ([`report`]) and their
//! writers ([`render`]), the tuner CSV writer, parser and matcher
//! ([`tuner_csv`]), a noisy scripted measurer for tests ([`fake`]), the
//! child processes of environment candidates ([`child`]), lock step
//! across the processes of a job ([`lockstep`]), and the `tune` command's
//! job from typed options to report ([`job`]: the budget, the children,
//! the child's server).
//!
//! Not for: touching NCCL or a GPU, the launcher, flags, printing or exit
//! codes. Measurements come through the [`Measurer`] trait (the NCCL
//! measurer reaches [`job::run`] through the CLI's [`job::Measurers`]),
//! other processes through `collbench_core::Bootstrap`; the NCCL
//! measurer, the embedded tuner plugin and the CLI live in other crates.
//! No `unsafe`; its I/O is its child processes (pipes), the child jobs'
//! ports and reading the transport's facts.
//!
//! How `collbench tune` drives it (with the NCCL measurer in place of the
//! fake, and the stop flag set by a Ctrl-C handler):
//!
//! ```
//! use collbench_core::{size, Collective};
//! use collbench_tune::{fake::FakeMeasurer, parse_budget, render, tune, TuneConfig, TunerConfig};
//! use std::sync::atomic::AtomicBool;
//!
//! let sizes = size::sweep(1 << 20, 1 << 30, size::Step::Factor(4)).unwrap();
//! let mut cfg = TuneConfig::new(vec![Collective::AllGather], sizes, 2, 1, parse_budget("10m").unwrap());
//! cfg.max_channels = Some(32);
//! let mut measurer = FakeMeasurer::new(1, Box::new(|_, case| Some(case.bytes as f64 / 250e3)));
//! let stop = AtomicBool::new(false);
//! let report = tune(&mut measurer, &cfg, &stop, &mut |p| {
//!     eprint!("\r{} {} [{}] {:.0} s left", p.band.op.name(), p.band.probe_bytes, p.setting, p.budget_left_us / 1e6);
//! });
//! print!("{}", render::text(&report));
//! let (csv, notes) = TunerConfig::from_report(&report);
//! let file_text = csv.to_csv(&notes); // what `--tuner-config` reads back
//! assert_eq!(TunerConfig::parse(&file_text).unwrap(), csv);
//! ```
#![forbid(unsafe_code)]

pub mod child;
pub mod fake;
pub mod job;
pub mod lockstep;
pub mod measure;
pub mod plan;
pub mod render;
pub mod report;
pub mod search;
pub mod setting;
pub mod space;
pub mod stats;
pub mod tuner_csv;

pub use measure::{InPair, MeasureError, Measured, Measurer, Sample, WallClock};
pub use report::{
    BandReport, CandidateReport, CandidateStatus, End, Outcome, ProcessWide, ProcessWideBand,
    ProcessWideFigure, TuneReport,
};
pub use search::{parse_budget, tune, BudgetError, Phase, Progress, TuneConfig};
pub use setting::{
    AlgoProto, Algorithm, Case, Cost, CtaPolicy, Protocol, Registration, Setting, TunerAxis,
};
pub use space::{Band, CandidateSpace};
pub use stats::{AdaptiveStop, Decision, GainRule, Interval, StopReason, StopRule, Verdict};

pub use tuner_csv::{TunerConfig, TunerCsvError, TunerCsvErrors, TunerQuery, TunerRow};
