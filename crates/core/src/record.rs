//! The result model: one [`Record`] per run, whatever produced it (the
//! runner, or a parser of another tool's log). Printers, checks, reports and
//! comparisons read only this. Its JSON form is versioned and described by
//! `schema/record.schema.json` in the repository.

use crate::adaptive::StopReason;
use crate::ceiling::Ceiling;
use crate::explain::Explanation;
use crate::nccl_path::NcclPath;
use crate::stats::TimeStats;
use crate::topology::Topology;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub(crate) mod bitwise;
pub use bitwise::{BitPosition, Bitwise};

/// Version of the JSON layout; bump on any incompatible change.
///
/// 2: placements carry `explain` (what NCCL reported it ran).
/// 3: placements timed with `-n auto` carry `auto` (the precision their
/// repeats reached); a reader of version 2 refuses that field.
/// 4: placements carry `ceiling` and records `topology` (issue #40).
/// 5: placements carry `arrival` (who arrived last, issue #53) and records
/// `nccl_path` (the path NCCL took, issue #50); within issue #50, before
/// any release, placements gained `why` (the causes of a low row), the
/// path `channels` and the topology's per-GPU `devices`.
/// 6: placements carry `bitwise` and settings `bitwise_repeats` (bitwise
/// repeatability, `-B`, issue #52).
pub const SCHEMA_VERSION: u32 = 6;

/// One benchmark run: metadata plus one [`CaseResult`] per measured case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// [`SCHEMA_VERSION`] of the layout this was written with.
    pub schema_version: u32,
    /// What produced the record: `collbench`, or the parsed tool's name
    /// (`nccl-tests`, `rccl-tests`, `nccom-test`, `osu`, `nvshmem-perftest`).
    pub source: String,
    /// Version of the producing tool, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// Backend used (`cpu`, `nccl`, `mpi`), where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Communication library and version (`NCCL 2.28.3`), where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// Path the library was loaded from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library_path: Option<String>,
    /// Start time, RFC 3339 (UTC), where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// The command line, one argument per element.
    #[serde(default)]
    pub command_line: Vec<String>,
    /// The NCCL_*/CUDA_* (and launcher) variables that shape results.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Run settings (sweep, iterations, checks).
    #[serde(default)]
    pub settings: RunSettings,
    /// Hosts and devices taking part, one per rank.
    #[serde(default)]
    pub devices: Vec<DeviceInfo>,
    /// One entry per measured case, in run order.
    #[serde(default)]
    pub results: Vec<CaseResult>,
    /// Where the record was read from (file name), for parsed logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// nccl-tests' "Avg bus bandwidth" as printed, where the log had it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_busbw_gbps: Option<f64>,
    /// Set when the run stopped before its end (Ctrl-C, SIGTERM): why,
    /// e.g. `interrupted by a signal after 12 rows`. `results` holds the
    /// rows measured until then. Absent from a complete run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
    /// The hardware the run found (GPUs, NICs, host memory), where a
    /// probe ran; the rows' ceilings were computed from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
    /// The path NCCL took (network plugin, transports per rank pair, GDR,
    /// NVLS), read from its INFO lines: captured by a run, or found in a
    /// parsed log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_path: Option<NcclPath>,
}

/// Settings of a run, as the nccl-tests header reports them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunSettings {
    #[serde(default)]
    pub world_size: u64,
    #[serde(default)]
    pub processes: u64,
    #[serde(default)]
    pub threads_per_process: u64,
    #[serde(default)]
    pub gpus_per_thread: u64,
    #[serde(default)]
    pub min_bytes: u64,
    #[serde(default)]
    pub max_bytes: u64,
    /// Multiplicative step (`-f`), when the sweep was geometric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_factor: Option<u64>,
    /// Additive step (`-i`), when the sweep was linear.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_bytes: Option<u64>,
    #[serde(default)]
    pub warmup_iters: u64,
    #[serde(default)]
    pub iters: u64,
    #[serde(default)]
    pub agg_iters: u64,
    /// Whether results were checked (`-c`).
    #[serde(default)]
    pub check: bool,
    /// CUDA graph replays (`-G`); 0 when off.
    #[serde(default)]
    pub graph: u64,
    /// Blocking collectives (`-z`).
    #[serde(default)]
    pub blocking: bool,
    /// How per-rank times were combined (`-a`): rank0, mean, min, max.
    #[serde(default)]
    pub average: String,
    /// Elements by which buffers were misaligned (`-u`).
    #[serde(default)]
    pub unalign: u64,
    /// Whether every timed iteration's time was kept (`-I 1`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub per_iter_timing: bool,
    /// Leading iterations left out of the per-iteration summary (`-K`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub per_iter_skip: u64,
    /// Repeats compared bit for bit with a reference run (`-B`); 0 when
    /// off.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bitwise_repeats: u64,
}

fn is_false(b: &bool) -> bool {
    !b
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One rank's placement: host and device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceInfo {
    pub rank: u64,
    #[serde(default)]
    pub group: u64,
    #[serde(default)]
    pub pid: u64,
    pub host: String,
    /// Device index on the host (GPU ordinal, or CPU rank thread).
    #[serde(default)]
    pub device: u64,
    /// PCI bus id, where the device has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_id: Option<String>,
    /// Device name (`NVIDIA H200`, `cpu`).
    #[serde(default)]
    pub name: String,
}

/// One measured case: a collective at one size, type, operator and root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaseResult {
    /// Collective name (`all_reduce`, ...), or the foreign tool's test name
    /// where it has no collbench equivalent (`osu_latency`).
    pub op: String,
    /// The size column: bytes of the larger buffer.
    pub size_bytes: u64,
    /// The count column: elements passed to the library call.
    pub count: u64,
    /// Data type name (`float`).
    pub dtype: String,
    /// Redop column text (`sum`, `none`).
    pub redop: String,
    /// Root rank; -1 when the collective has none.
    pub root: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_place: Option<Placement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place: Option<Placement>,
}

impl CaseResult {
    /// A row of `op` summing floats (`size_bytes / 4` of them), rootless,
    /// with no placement measured yet: the row most examples start from.
    pub fn float_sum(op: &str, size_bytes: u64) -> CaseResult {
        CaseResult {
            op: op.into(),
            size_bytes,
            count: size_bytes / 4,
            dtype: "float".into(),
            redop: "sum".into(),
            root: -1,
            ..CaseResult::default()
        }
    }

    /// The placements that were measured, out-of-place first.
    pub fn placements(&self) -> impl Iterator<Item = (&'static str, &Placement)> {
        [
            ("out_of_place", &self.out_of_place),
            ("in_place", &self.in_place),
        ]
        .into_iter()
        .filter_map(|(name, p)| p.as_ref().map(|p| (name, p)))
    }

    /// Wrong elements over both placements (unchecked counts as 0).
    pub fn total_wrong(&self) -> u64 {
        self.placements().map(|(_, p)| p.wrong.unwrap_or(0)).sum()
    }
}

/// Measurements of one placement (out-of-place or in-place) of a case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    /// The reported time per iteration in microseconds (nccl-tests' time
    /// column: wall time of the timed loop divided by iterations, combined
    /// over ranks as `-a` says).
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// Differing elements summed over ranks; `None` when not checked (N/A).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrong: Option<u64>,
    /// Timed iterations behind `time_us`.
    #[serde(default)]
    pub iterations: u64,
    /// Per-iteration statistics, where per-iteration times were taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<TimeStats>,
    /// Each rank's own time_us, indexed by rank (for straggler analysis).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rank_time_us: Vec<f64>,
    /// What the library reported it ran (NCCL's algorithm, protocol and
    /// channels per kernel), taken in a separate untimed pass; absent for
    /// backends that cannot say (CPU, MPI) and for parsed logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain: Option<Box<Explanation>>,
    /// Every timed iteration's time in microseconds (the slowest rank's),
    /// kept with per-iteration timing (`-I 1`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub iter_times_us: Vec<f64>,
    /// The same per process (one row each, the slowest of its ranks), when
    /// more than one process took part.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub process_iter_times_us: Vec<Vec<f64>>,
    /// Under `-n auto`: how precise `time_us` is, as its repeats left it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<AutoPrecision>,
    /// The busbw the hardware allows for this row and the part that sets
    /// it (`collbench-ceiling`); absent where the topology was unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<Ceiling>,
    /// Who entered the collective last and by how much, the time inside
    /// and the device-time busbw (`run --arrival`, `check`'s battery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<Box<crate::arrival::Arrival>>,
    /// Why the row is low: under [`crate::why::LOW_FRACTION`] of its
    /// ceiling at [`crate::why::LOW_FROM_BYTES`] or more, the causes
    /// collbench can show, most costly first (docs/ceiling.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub why: Vec<crate::why::Cause>,
    /// Bitwise repeatability (`-B`): the output of repeats on the same
    /// input against a reference run, summed over ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitwise: Option<Bitwise>,
}

/// How precise a `-n auto` placement's time is: what its series of
/// repeats reached when it stopped, so a reader can tell a time pinned to
/// ±1% from one cut short by the placement's time cap on a noisy link.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AutoPrecision {
    /// Repeats counted in the time (the one-iteration probe only when it
    /// lasted a whole repeat).
    pub repeats: u32,
    /// Half-width of the 95% interval of the mean time per iteration,
    /// relative to it (0.01: ±1%); absent with a single repeat, which
    /// says nothing of its spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rel_half_width: Option<f64>,
    /// Why the repeats stopped.
    pub stopped: StopReason,
}

/// The JSON Schema of [`Record`] (the file `schema/record.schema.json`).
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Record);
    serde_json::to_string_pretty(&schema).expect("schema serialises") + "\n"
}

impl Record {
    /// A new, empty record from `source`.
    pub fn new(source: &str) -> Record {
        Record {
            schema_version: SCHEMA_VERSION,
            source: source.to_string(),
            ..Record::default()
        }
    }

    /// Results of one op, in order.
    pub fn op_results<'a>(&'a self, op: &'a str) -> impl Iterator<Item = &'a CaseResult> + 'a {
        self.results.iter().filter(move |r| r.op == op)
    }

    /// Distinct op names, in first-seen order.
    pub fn ops(&self) -> Vec<String> {
        let mut ops: Vec<String> = Vec::new();
        for r in &self.results {
            if !ops.contains(&r.op) {
                ops.push(r.op.clone());
            }
        }
        ops
    }

    /// Total wrong elements over every case.
    pub fn total_wrong(&self) -> u64 {
        self.results.iter().map(CaseResult::total_wrong).sum()
    }

    /// nccl-tests' "Avg bus bandwidth": the mean busbw over every measured
    /// placement of every row (both out-of-place and in-place), `ops`
    /// restricting it to some ops when given.
    pub fn avg_busbw(&self, op: Option<&str>) -> f64 {
        avg_busbw(self.results.iter().filter(|r| op.is_none_or(|o| r.op == o)))
    }
}

/// nccl-tests' "Avg bus bandwidth" over `rows`: the mean busbw of every
/// measured placement (out-of-place and in-place each count once); 0 when
/// nothing was measured. The one place this average is computed.
pub fn avg_busbw<'a>(rows: impl IntoIterator<Item = &'a CaseResult>) -> f64 {
    let (sum, n) = rows
        .into_iter()
        .flat_map(|r| r.placements())
        .fold((0.0, 0usize), |(s, n), (_, p)| (s + p.busbw_gbps, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// A short per-op summary as in vendors' baseline tables: busbw at the
/// largest size, peak busbw and time at the smallest size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpSummary {
    pub op: String,
    pub dtype: String,
    pub largest_bytes: u64,
    pub busbw_at_largest_gbps: f64,
    pub peak_busbw_gbps: f64,
    pub peak_at_bytes: u64,
    pub smallest_bytes: u64,
    pub time_at_smallest_us: f64,
    pub wrong: u64,
}

impl Record {
    /// One [`OpSummary`] per (op, dtype), from out-of-place figures (in-place
    /// where out-of-place is missing).
    pub fn summaries(&self) -> Vec<OpSummary> {
        let mut keys: Vec<(String, String)> = Vec::new();
        for r in &self.results {
            let k = (r.op.clone(), r.dtype.clone());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys.into_iter()
            .filter_map(|(op, dtype)| {
                let rows: Vec<(&CaseResult, &Placement)> = self
                    .results
                    .iter()
                    .filter(|r| r.op == op && r.dtype == dtype)
                    .filter_map(|r| {
                        r.out_of_place
                            .as_ref()
                            .or(r.in_place.as_ref())
                            .map(|p| (r, p))
                    })
                    .collect();
                let largest = rows.iter().max_by_key(|(r, _)| r.size_bytes)?;
                // The smallest non-empty size: a 0-byte row only times
                // the launch of nothing.
                let smallest = rows
                    .iter()
                    .filter(|(r, _)| r.size_bytes > 0)
                    .min_by_key(|(r, _)| r.size_bytes)
                    .or_else(|| rows.iter().min_by_key(|(r, _)| r.size_bytes))?;
                let peak = rows
                    .iter()
                    .max_by(|a, b| a.1.busbw_gbps.total_cmp(&b.1.busbw_gbps))?;
                Some(OpSummary {
                    op: op.clone(),
                    dtype: dtype.clone(),
                    largest_bytes: largest.0.size_bytes,
                    busbw_at_largest_gbps: largest.1.busbw_gbps,
                    peak_busbw_gbps: peak.1.busbw_gbps,
                    peak_at_bytes: peak.0.size_bytes,
                    smallest_bytes: smallest.0.size_bytes,
                    time_at_smallest_us: smallest.1.time_us,
                    wrong: self
                        .results
                        .iter()
                        .filter(|r| r.op == op && r.dtype == dtype)
                        .map(CaseResult::total_wrong)
                        .sum(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in schema must be what the code produces; regenerate
    /// with `COLLBENCH_WRITE_SCHEMA=1 cargo test -p collbench-core schema`.
    #[test]
    fn schema_file_is_current() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../schema/record.schema.json"
        );
        let want = json_schema();
        if std::env::var_os("COLLBENCH_WRITE_SCHEMA").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert_eq!(
            have, want,
            "schema/record.schema.json is stale: regenerate it (see this test's doc)"
        );
    }

    #[test]
    fn summary_smallest_is_the_smallest_non_empty_size() {
        let mut r = Record::new("collbench");
        for (size, t) in [(0u64, 0.37), (16, 9.0), (32, 9.5)] {
            r.results.push(CaseResult {
                op: "all_gather".into(),
                size_bytes: size,
                count: size / 4,
                dtype: "float".into(),
                redop: "none".into(),
                root: -1,
                out_of_place: Some(Placement {
                    time_us: t,
                    ..Placement::default()
                }),
                in_place: None,
            });
        }
        let s = &r.summaries()[0];
        assert_eq!((s.smallest_bytes, s.time_at_smallest_us), (16, 9.0));
        // Only empty rows: they are all there is.
        r.results.retain(|c| c.size_bytes == 0);
        assert_eq!(r.summaries()[0].smallest_bytes, 0);
    }

    #[test]
    fn record_round_trips_through_json() {
        let mut r = Record::new("collbench");
        r.results.push(CaseResult {
            op: "all_reduce".into(),
            size_bytes: 8,
            count: 2,
            dtype: "float".into(),
            redop: "sum".into(),
            root: -1,
            out_of_place: Some(Placement {
                time_us: 1.5,
                wrong: Some(0),
                ..Placement::default()
            }),
            in_place: None,
        });
        let back: Record = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.total_wrong(), 0);
    }
}
