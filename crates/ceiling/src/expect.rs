//! `collbench expect`: the ceilings and bottlenecks of a described machine
//! for a list of ops and sizes, as text or JSON, for planning and for
//! reading published figures.

use crate::{builtin, ceiling_in, file, split, Query};
use collbench_core::size::format_size;
use collbench_core::{Ceiling, Collective, Topology};
use serde::Serialize;
use std::path::PathBuf;

/// What `expect` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectFormat {
    Text,
    Json,
}

/// `collbench expect`'s options, as the CLI converts its flags.
#[derive(Debug, Clone)]
pub struct ExpectOptions {
    pub topology: PathBuf,
    pub ops: Vec<Collective>,
    pub sizes: Vec<u64>,
    /// Hosts in the job, overriding the file's `hosts`.
    pub hosts: Option<u64>,
    /// nccl-tests' NCCL_TESTS_SPLIT_MASK: the ceiling of one of the
    /// communicators it makes, all running at once.
    pub split_mask: Option<u64>,
    pub format: ExpectFormat,
}

/// One line of the answer.
#[derive(Debug, Clone, Serialize)]
pub struct ExpectRow {
    pub op: Collective,
    pub size_bytes: u64,
    /// `None` where the file lacks what the model needs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<Ceiling>,
    /// What was missing, where there is no ceiling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
}

/// The whole answer, as `--format json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Expectation {
    pub topology: Topology,
    pub rows: Vec<ExpectRow>,
}

/// Why `expect` has no answer.
#[derive(Debug, thiserror::Error)]
pub enum ExpectError {
    #[error(transparent)]
    File(#[from] file::FileError),
    /// The split mask does not fit the job (one line with the fix).
    #[error("{0}")]
    Split(String),
    /// `--hosts` makes a job no machine has (one line with the fix).
    #[error("{0}")]
    Hosts(String),
}

/// Reads the topology file and computes every (op, size) row.
pub fn expectation(opts: &ExpectOptions) -> Result<Expectation, ExpectError> {
    let (mut topology, fabric) = builtin::load_machine(&opts.topology)?;
    if let Some(h) = opts.hosts {
        topology.hosts = h;
        // The file's ranks per host times these hosts must still be a job.
        file::check(&topology)
            .map_err(|problem| ExpectError::Hosts(format!("--hosts {h}: {problem}")))?;
    }
    if let Some(mask) = opts.split_mask {
        apply_split(&mut topology, mask)?;
    }
    let rows = opts
        .ops
        .iter()
        .flat_map(|&op| opts.sizes.iter().map(move |&b| (op, b)))
        .map(|(op, size_bytes)| {
            let q = Query {
                op,
                bytes: size_bytes,
                in_place: false,
                algorithm: None,
            };
            let (ceiling, unknown) = match ceiling_in(&topology, &fabric, &q, &[]) {
                Ok(c) => (Some(c), None),
                Err(m) => (None, Some(m.0.to_string())),
            };
            ExpectRow {
                op,
                size_bytes,
                ceiling,
                unknown,
            }
        })
        .collect();
    Ok(Expectation { topology, rows })
}

/// Narrows the job to one communicator of `mask`, the others sharing the
/// hosts' NICs with it.
fn apply_split(topology: &mut Topology, mask: u64) -> Result<(), ExpectError> {
    let per_host = topology.ranks_per_host().ok_or_else(|| {
        ExpectError::Split(
            "--split-mask needs the ranks per host: give [gpu] count or ranks_per_host in the file"
                .into(),
        )
    })?;
    let comms = topology.concurrent_comms.unwrap_or(1);
    let s = split::split_shape(topology.hosts, per_host, mask).map_err(ExpectError::Split)?;
    topology.hosts = s.hosts;
    topology.ranks_per_host = Some(s.ranks_per_host);
    topology.concurrent_comms = Some(comms.saturating_mul(s.per_host_comms));
    Ok(())
}

/// `expect`'s stdout text.
pub fn expect_main(opts: &ExpectOptions) -> Result<String, ExpectError> {
    let e = expectation(opts)?;
    Ok(match opts.format {
        ExpectFormat::Json => serde_json_text(&e),
        ExpectFormat::Text => text(&e),
    })
}

fn serde_json_text(e: &Expectation) -> String {
    // Plain data with string keys: serialising cannot fail.
    serde_json::to_string_pretty(e).unwrap_or_default() + "\n"
}

/// One line per row, the reasons once per op below.
fn text(e: &Expectation) -> String {
    let t = &e.topology;
    let comms = match t.concurrent_comms {
        Some(c) if c > 1 => format!(", {c} such communicators at once on each host"),
        _ => String::new(),
    };
    let mut out = format!(
        "# {} : {} host(s) x {} rank(s){comms}\n",
        t.name.as_deref().unwrap_or("topology"),
        t.hosts,
        t.ranks_per_host().map_or("?".into(), |r| r.to_string())
    );
    out += &format!(
        "# {:>12}  {:<15} {:>14}  {:<15} {}\n",
        "size", "op", "ceiling(GB/s)", "bottleneck", "algorithm"
    );
    let mut whys: Vec<(Collective, String)> = Vec::new();
    for r in &e.rows {
        let (gbps, by, algo) = match &r.ceiling {
            Some(c) => (
                format!("{:.1}", c.busbw_gbps),
                c.bottleneck.label().to_string(),
                c.algorithm.label().to_string(),
            ),
            None => (
                "unknown".into(),
                "unknown".into(),
                r.unknown.clone().unwrap_or_default(),
            ),
        };
        out += &format!(
            "  {:>12}  {:<15} {:>14}  {:<15} {}\n",
            format_size(r.size_bytes),
            r.op.name(),
            gbps,
            by,
            algo
        );
        if let Some(c) = &r.ceiling {
            let why = c
                .why
                .split("; below 1 MiB")
                .next()
                .unwrap_or(&c.why)
                .to_string();
            if !whys.iter().any(|(op, w)| *op == r.op && *w == why) {
                whys.push((r.op, why));
            }
        }
    }
    for (op, why) in whys {
        // Most reasons start with the op's own name already.
        if why.starts_with(op.name()) {
            out += &format!("# {why}\n");
        } else {
            out += &format!("# {}: {why}\n", op.name());
        }
    }
    out
}
