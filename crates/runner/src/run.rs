//! The measuring loop: plan -> backend -> per-rank measurements -> Record.
//!
//! Every process runs the same plan in the same order (collective
//! libraries require it); per-rank results travel to rank 0 through the
//! job's [`Bootstrap`] (the control plane), and only rank 0 assembles rows
//! and tells observers.

use crate::arrival::timelines::host_name;
use crate::auto_iters;
use crate::backend::{Backend, BackendError, CaseSpec, MemoryUsage};
use crate::case_names::CaseNames;
use crate::combine::{combine, Combine, RankReport};
use crate::gather::gather_json;
use crate::plan::Plan;
use crate::timing::Timing;
use crate::watch::{Stop, Watch};
use crate::watchdog::{watch_over, Done, Watchdog, Watched};
use collbench_core::size::{format_bytes, ByteStyle};
use collbench_core::{
    record::RunSettings, verify::mix, AutoPrecision, Bootstrap, CaseResult, Collective, DeviceInfo,
    Placement, Record,
};
use std::sync::{Arc, Mutex};

pub use crate::error::{PlanError, RunError};

/// Receives results as they are measured (printers, progress bars).
/// Called on rank 0 only.
pub trait RunObserver {
    /// Once, before the first case, with the run's metadata.
    fn begin(&mut self, _record: &Record) {}
    /// Before the first row of a collective.
    fn begin_collective(&mut self, _coll: Collective, _record: &Record) {}
    /// One finished row.
    fn row(&mut self, _coll: Collective, _row: &CaseResult) {}
    /// GPU memory taken so far (`-M 1`), the largest over processes,
    /// just before [`RunObserver::end_collective`]; never called for
    /// backends without GPU memory.
    fn memory(&mut self, _usage: &MemoryUsage) {}
    /// After the last row of a collective, with all its rows.
    fn end_collective(&mut self, _coll: Collective, _rows: &[CaseResult]) {}
    /// A remark worth a comment line (e.g. a skipped case).
    fn note(&mut self, _text: &str) {}
    /// `-N 0` (until stopped) begins another cycle of `coll`'s sweep: the
    /// runner now keeps only the last complete cycle and this one, and an
    /// observer that keeps rows should too, or memory grows without end.
    fn endless_cycle(&mut self, _coll: Collective) {}
}

/// An observer that ignores everything.
pub struct NoObserver;
impl RunObserver for NoObserver {}

/// Drives a [`Plan`] through a [`Backend`].
pub struct Runner<'a> {
    backend: &'a mut dyn Backend,
    control: &'a dyn Bootstrap,
    plan: Plan,
    watchdog: Watchdog,
    /// Where this process's ranks are (made by [`Runner::run`]).
    watch: Arc<Watch>,
    /// The last cases' names, by number in the plan's order (the
    /// watchdog's line names cases by them).
    names: Arc<Mutex<CaseNames>>,
}

impl<'a> Runner<'a> {
    /// A runner for this process's backend; `control` connects the
    /// processes of the job (a world of one for single-process runs).
    pub fn new(backend: &'a mut dyn Backend, control: &'a dyn Bootstrap, plan: Plan) -> Runner<'a> {
        Runner {
            backend,
            control,
            plan,
            watchdog: Watchdog::default(),
            watch: Arc::new(Watch::new(1, 0, Vec::new())),
            names: Arc::default(),
        }
    }

    /// Watches the run: a deadline for collectives that make no progress,
    /// fault hooks, a last resort (see [`crate::watchdog`]). Without it,
    /// only the job's failures stop a run.
    pub fn with_watchdog(mut self, watchdog: Watchdog) -> Runner<'a> {
        self.watchdog = watchdog;
        self
    }

    /// Runs the whole plan. `record` carries the metadata the caller knows
    /// (command line, environment); the runner adds settings, devices and
    /// results. Returns the finished record on rank 0 and `None` elsewhere.
    /// When the job stops (a stuck collective, a failed peer), the error
    /// is the stop's reason whatever the backend said.
    pub fn run(
        &mut self,
        record: Record,
        obs: &mut dyn RunObserver,
    ) -> Result<Option<Record>, RunError> {
        let local = self.backend.local_ranks();
        let first = self.control.rank() * local;
        self.watch = Arc::new(Watch::new(local, first, self.watchdog.faults.clone()));
        self.backend.set_watch(self.watch.clone());
        let info = self.backend.info();
        let host = info.devices.first().map(|d| d.host.clone());
        let (control, watch, names) = (self.control, self.watch.clone(), self.names.clone());
        let config = self.watchdog.clone();
        let done = Done::default();
        let result = if config.needed(control) {
            std::thread::scope(|s| {
                s.spawn(|| {
                    watch_over(Watched {
                        control,
                        watch: &watch,
                        config: &config,
                        names: &names,
                        host: host.as_deref().unwrap_or("?"),
                        done: &done,
                    })
                });
                let _done = done.on_drop();
                self.run_plan(record, obs, info)
            })
        } else {
            self.run_plan(record, obs, info)
        };
        // The backend may fail on the job's failure before the watchdog
        // has seen it: the control plane's word then.
        let stop = watch
            .reason()
            .cloned()
            .or_else(|| control.failure().map(Stop::from_failure));
        let result = match (result, stop) {
            (Err(_), Some(stop)) => Err((&stop).into()),
            (result, _) => result,
        };
        if let (Err(e), true) = (&result, control.world_size() > 1) {
            if let Some(why) = e.job_failure() {
                crate::watchdog::arm_after_failure(&config, why);
            }
        }
        result
    }

    fn run_plan(
        &mut self,
        mut record: Record,
        obs: &mut dyn RunObserver,
        info: crate::BackendInfo,
    ) -> Result<Option<Record>, RunError> {
        let sizes = self.plan.sizes().map_err(PlanError::from)?;
        let world_size = self.backend.world_size();
        record.backend = Some(info.name.clone());
        record.library = info.library.clone();
        record.library_path = info.library_path.clone();
        record.settings = self.settings(world_size);
        record.devices = self.gather_devices(&info.devices)?;
        self.backend.set_unalign(self.plan.unalign as u64)?;
        let root = self.control.rank() == 0;
        if root {
            obs.begin(&record);
        }
        let timing = self.timing();
        let collectives = self.plan.collectives.clone();
        // alltoallv's traffic must fit the job; a backend without alltoallv
        // skips it (with a note) rather than failing the whole run.
        let mut no_alltoallv = None;
        if collectives.contains(&Collective::AllToAllV) {
            self.plan
                .traffic
                .check_job(world_size, self.plan.min_bytes, self.plan.max_bytes)
                .map_err(PlanError::from)?;
            no_alltoallv = self.backend.set_traffic(&self.plan.traffic).err();
        }
        for coll in collectives {
            if let Some(why) = skip_reason(coll, world_size, no_alltoallv.as_ref()) {
                if root {
                    obs.note(&why);
                }
                continue;
            }
            if root {
                obs.begin_collective(coll, &record);
            }
            let rows = self.cycles(coll, &sizes, &timing, obs)?;
            if self.plan.memory_report {
                if let Some(usage) = self.gather_memory()? {
                    obs.memory(&usage);
                }
            }
            if root {
                obs.end_collective(coll, &rows);
            }
            record.results.extend(rows);
        }
        record.nccl_path = crate::gather::nccl_path(self.control, self.backend.nccl_path())?;
        Ok(root.then_some(record))
    }

    /// How every case is timed: the plan's timing as given, with what
    /// the sweep decides (buffers rotate within its largest size) and at
    /// least one iteration of one operation.
    fn timing(&self) -> Timing {
        let t = self.plan.timing;
        Timing {
            iters: t.iters.max(1),
            agg_iters: t.agg_iters.max(1),
            max_bytes: self.plan.max_bytes,
            iteration_pass: self.plan.auto_iters.is_none() || t.keep_iter_times,
            first_op: 0,
            ..t
        }
    }

    /// `-N` cycles of `coll`'s sweep; its rows. `-N 0` runs until stopped
    /// (nccl-tests' way to hunt a hang): only the last complete cycle and
    /// the one in progress are kept, so memory stays flat.
    fn cycles(
        &mut self,
        coll: Collective,
        sizes: &[u64],
        timing: &Timing,
        obs: &mut dyn RunObserver,
    ) -> Result<Vec<CaseResult>, RunError> {
        let mut rows = Vec::new();
        let forever = self.plan.cycles == 0;
        let mut cycle = 0;
        let mut last_cycle_start = 0;
        while forever || cycle < self.plan.cycles {
            if forever && cycle > 0 {
                // The last complete cycle stays until this one ends (a run
                // stopped mid-cycle still has a whole sweep to show).
                let done = rows.len() - last_cycle_start;
                rows.drain(..last_cycle_start);
                last_cycle_start = done;
                if self.control.rank() == 0 {
                    obs.endless_cycle(coll);
                }
            }
            self.sweep_once(coll, sizes, timing, obs, &mut rows)?;
            cycle = cycle.saturating_add(1);
        }
        Ok(rows)
    }

    /// One cycle of `coll`: every variant (type, operator, root) at every
    /// size, each row shown to `obs` and kept in `rows`. A variant the
    /// backend cannot run is skipped whole, with one note.
    fn sweep_once(
        &mut self,
        coll: Collective,
        sizes: &[u64],
        timing: &Timing,
        obs: &mut dyn RunObserver,
        rows: &mut Vec<CaseResult>,
    ) -> Result<(), RunError> {
        let world_size = self.backend.world_size();
        let root = self.control.rank() == 0;
        self.plan.root_in_range(world_size)?;
        for v in self.plan.variants(coll, world_size) {
            for &size in sizes {
                let counts = self.plan.counts(coll, size, v.dtype, world_size);
                let case = |in_place| CaseSpec {
                    collective: coll,
                    dtype: v.dtype,
                    redop: v.redop,
                    root: v.root,
                    counts,
                    in_place,
                    world_size,
                };
                if let Err(e) = self.backend.supports(&case(false)) {
                    if root {
                        obs.note(&format!("skipping {coll} {} {}: {e}", v.dtype, v.redop));
                    }
                    // The backend refuses the variant, not the size.
                    break;
                }
                let oop = self.placement(&case(false), timing)?;
                let ip = self.placement(&case(true), timing)?;
                if let (Some(oop), Some(ip)) = (oop, ip) {
                    let row = CaseResult {
                        op: coll.name().to_string(),
                        size_bytes: counts.size_bytes(v.dtype.size_bytes()),
                        count: counts.param_count,
                        dtype: v.dtype.name().to_string(),
                        redop: coll.redop_column(v.redop).to_string(),
                        root: if coll.spec().has_root {
                            v.root as i64
                        } else {
                            -1
                        },
                        out_of_place: Some(oop),
                        in_place: Some(ip),
                    };
                    obs.row(coll, &row);
                    rows.push(row);
                }
            }
        }
        Ok(())
    }

    fn settings(&self, world_size: usize) -> RunSettings {
        RunSettings {
            world_size: world_size as u64,
            processes: self.control.world_size() as u64,
            gpus_per_thread: self.backend.local_ranks() as u64,
            ..RunSettings::from(&self.plan)
        }
    }

    /// Every process's [`Backend::memory_usage`], combined on rank 0.
    fn gather_memory(&mut self) -> Result<Option<MemoryUsage>, RunError> {
        let mine = self.backend.memory_usage();
        let Some(all) = gather_json(self.control, "memory usage", &mine)? else {
            return Ok(None);
        };
        Ok(MemoryUsage::largest(all.into_iter().flatten()))
    }

    fn gather_devices(&self, local: &[DeviceInfo]) -> Result<Vec<DeviceInfo>, RunError> {
        let Some(all) = gather_json(self.control, "device list", &local.to_vec())? else {
            return Ok(Vec::new());
        };
        let mut devices: Vec<DeviceInfo> = all.into_iter().flatten().collect();
        devices.sort_by_key(|d| d.rank);
        Ok(devices)
    }

    /// Times and checks one placement; returns the row half on rank 0.
    /// One placement of a case: measured and checked on this process's
    /// ranks, the reports gathered, and on rank 0 combined into the row's
    /// placement (`None` on the other ranks).
    fn placement(
        &mut self,
        case: &CaseSpec,
        timing: &Timing,
    ) -> Result<Option<Placement>, RunError> {
        let index = {
            let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
            names.push(case_name(case))
        };
        self.watch.begin_case(index);
        // Clocks aligned afresh before every placement (they drift).
        let clock = match self.plan.timing.arrival {
            true => Some(crate::arrival::clock::sync(self.control)?),
            false => None,
        };
        self.watch.entering();
        let (mut report, iters, precision) = self.measure(case, timing)?;
        if let (Some(clock), Some(samples)) = (clock, report.arrival_samples.take()) {
            let info = self.backend.info();
            let host = host_name(info.devices.first().map(|d| d.host.as_str()));
            let first = self.watch.first_rank();
            report.arrival = Some(crate::arrival::timelines::aligned(
                &samples, clock, first, &host,
            ));
        }
        // Done with its collectives: exchanging results, then the next.
        self.watch.begin_case(index.saturating_add(1));
        let Some(reports) = gather_json(self.control, "measurement", &report)? else {
            return Ok(None);
        };
        let how = Combine {
            average: self.plan.average,
            cputime: self.plan.cputime,
            per_iter_timing: self.plan.timing.keep_iter_times,
            per_iter_skip: self.plan.per_iter_skip,
            iterations: iters * timing.agg_iters as u64,
            agg_iters: timing.agg_iters as u64,
        };
        let mut placement = combine(reports, case, &how);
        placement.auto = precision;
        Ok(Some(placement))
    }

    /// This process's report of one placement (timed, checked, explained),
    /// the iterations timed and, under `-n auto`, the precision reached.
    fn measure(
        &mut self,
        case: &CaseSpec,
        timing: &Timing,
    ) -> Result<(RankReport, u64, Option<AutoPrecision>), RunError> {
        let (m, iters, precision) = match self.plan.auto_iters {
            Some(rule) => {
                let a = auto_iters::measure(self.backend, self.control, case, timing, rule)?;
                (a.measurement, a.iters, a.precision)
            }
            None => (self.backend.time(case, timing)?, timing.iters as u64, None),
        };
        let wrong = self.check(case)?;
        let checked = self.placement_checks(case)?;
        // Its own pass, like the check: the timed loop never records.
        let explain = if self.plan.explain {
            self.backend.explain(case)?
        } else {
            None
        };
        let report = RankReport {
            rank_time_s: m.rank_time_s,
            rank_cputime_s: m.rank_cputime_s,
            iter_times_us: m.iter_times_us,
            iter_stats: m.iter_stats,
            wrong,
            checked,
            explain,
            arrival_samples: m.arrival,
            arrival: None,
        };
        Ok((report, iters, precision))
    }

    /// `-c` passes of the case (stopping at the first that finds wrong
    /// elements); `None` where the placement is not checked (`-c 0`, or an
    /// in-place run whose result is not defined).
    fn check(&mut self, case: &CaseSpec) -> Result<Option<u64>, RunError> {
        let passes = self.plan.check.passes();
        let checked = passes > 0 && (!case.in_place || case.collective.spec().in_place_checked);
        if !checked {
            return Ok(None);
        }
        self.watch.checking();
        let mut wrong = 0;
        for pass in 0..passes {
            let seed = case_seed(case, pass);
            wrong = self.backend.check(case, seed, self.plan.test_corrupt)?;
            if wrong > 0 {
                break;
            }
        }
        Ok(Some(wrong))
    }

    /// The plan's placement checks of the case, in order, after the `-c`
    /// passes (nccl-tests' order): their shares of the row.
    fn placement_checks(&mut self, case: &CaseSpec) -> Result<Placement, RunError> {
        let mut share = Placement::default();
        if self.plan.placement_checks.is_empty() {
            return Ok(share);
        }
        self.watch.checking();
        let at = crate::placement_check::Site {
            seed: case_seed(case, 0),
            first_rank: self.watch.first_rank(),
        };
        for check in &self.plan.placement_checks {
            check.measure(self.backend, case, at, &mut share)?;
        }
        Ok(share)
    }
}

/// Why `coll` is skipped in a job of `world_size` ranks, as the note says
/// it: alltoallv on a backend that refused its traffic (`no_alltoallv`),
/// or a collective that needs a power-of-two world. `None`: it runs.
fn skip_reason(
    coll: Collective,
    world_size: usize,
    no_alltoallv: Option<&BackendError>,
) -> Option<String> {
    if let (Collective::AllToAllV, Some(e)) = (coll, no_alltoallv) {
        return Some(format!("skipping {coll}: {e}"));
    }
    (coll.spec().needs_power_of_two && !world_size.is_power_of_two())
        .then(|| format!("{coll}: nRanks {world_size} is not a power of 2, skipping"))
}

/// How the watchdog's line names a case: "all_reduce 64 MiB", and
/// "in place" for the in-place placement.
fn case_name(case: &CaseSpec) -> String {
    let size = format_bytes(case.size_bytes(), ByteStyle::Table);
    let place = if case.in_place { " in place" } else { "" };
    format!("{} {size}{place}", case.collective)
}

/// A fresh seed per case and pass, so stale data from an earlier case or
/// pass can never look right.
fn case_seed(case: &CaseSpec, pass: u32) -> u64 {
    let mut h = mix(case.collective as u64 + 1);
    h = mix(h ^ case.dtype as u64);
    h = mix(h ^ case.redop as u64);
    h = mix(h ^ case.root as u64);
    h = mix(h ^ case.counts.param_count);
    h = mix(h ^ case.in_place as u64);
    mix(h ^ pass as u64)
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
