//! The tuner config file in the CSV format of NCCL's example tuner plugin
//! (`ext-tuner/example` in NCCL's plugin sources): the writer `tune` uses,
//! the parser `run --tuner-config` uses, and the matcher both NCCL's
//! example plugin and collbench's embedded one follow.
//!
//! Format (one rule per line):
//! `collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]`.
//! A line whose first character is `#` is a comment; empty lines are
//! skipped. `channels = -1` keeps NCCL's channel count; `nNodes`, `nRanks`,
//! `numPipeOps`, `regBuff = -1` match anything, and omitted optional fields
//! match anything too.
//!
//! The example plugin quietly reads a bad line as something else (an
//! unknown collective becomes allreduce, an unknown algorithm ring, `1M`
//! becomes 1 byte, a line past 255 characters is split in two). This parser
//! refuses every such line instead, with one error line each, so a file
//! that passes here means the same thing to both plugins.

use crate::report::{Outcome, TuneReport};
use crate::setting::{
    tuner_coll_from_name, tuner_coll_name, AlgoProto, Algorithm, CtaPolicy, Protocol, Registration,
    TunerAxis,
};
use collbench_core::Collective;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The example plugin reads lines with `fgets` into 256 bytes: content
/// longer than this is split into two lines.
pub const MAX_LINE_CHARS: usize = 254;

/// The header line `tune` writes (a comment, as in NCCL's sample file).
pub const FORMAT_LINE: &str =
    "# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff";

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunerRow {
    pub op: Collective,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub algorithm: Algorithm,
    pub protocol: Protocol,
    /// Channel count, or -1 for NCCL's choice.
    pub channels: i32,
    /// Nodes to match, or -1 for any.
    pub n_nodes: i32,
    /// Ranks to match, or -1 for any.
    pub n_ranks: i32,
    /// Operations in the group to match, or -1 for any (also when omitted).
    pub num_pipe_ops: i32,
    /// 1: registered buffers only, 0: unregistered only, -1: either (also
    /// when omitted).
    pub reg_buff: i32,
}

/// A parsed file: the rules in file order (the first match wins).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunerConfig {
    pub rows: Vec<TunerRow>,
}

/// One malformed line: where, what is wrong, what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tuner config line {line}: {problem}; allowed: {allowed}")]
pub struct TunerCsvError {
    /// 1-based line number.
    pub line: usize,
    pub problem: String,
    pub allowed: String,
}

/// Every malformed line of a file, one error line each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunerCsvErrors(pub Vec<TunerCsvError>);

impl TunerCsvErrors {
    /// At most `max` error lines, each starting `origin: `, then one line
    /// counting the rest (`... and 7100000 more malformed line(s)`).
    pub fn first_lines(&self, origin: &str, max: usize) -> Vec<String> {
        let mut lines: Vec<String> = self
            .0
            .iter()
            .take(max)
            .map(|e| format!("{origin}: {e}"))
            .collect();
        if self.0.len() > max {
            let more = self.0.len() - max;
            lines.push(format!("{origin}: ... and {more} more malformed line(s)"));
        }
        lines
    }
}

impl fmt::Display for TunerCsvErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(|e| e.to_string()).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl std::error::Error for TunerCsvErrors {}

/// What a collective call looks like to the tuner (the arguments of
/// `getCollInfo` plus the communicator's size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunerQuery {
    pub op: Collective,
    /// NCCL's `nBytes` (nccl-tests' size column).
    pub bytes: u64,
    pub n_nodes: i32,
    pub n_ranks: i32,
    pub num_pipe_ops: i32,
    /// Whether NCCL can use the user buffers registered.
    pub reg_buff: bool,
}

const FIELD_NAMES: [&str; 10] = [
    "collective_type",
    "min_bytes",
    "max_bytes",
    "algorithm",
    "protocol",
    "channels",
    "nNodes",
    "nRanks",
    "numPipeOps",
    "regBuff",
];

impl TunerRow {
    /// Whether the row applies to `q`, by the example plugin's test: same
    /// collective, `min_bytes <= bytes <= max_bytes`, and every
    /// topology field equal or -1.
    pub fn matches(&self, q: &TunerQuery) -> bool {
        let eq_or_any = |field: i32, value: i32| field == -1 || field == value;
        self.op == q.op
            && self.min_bytes <= q.bytes
            && q.bytes <= self.max_bytes
            && eq_or_any(self.n_nodes, q.n_nodes)
            && eq_or_any(self.n_ranks, q.n_ranks)
            && eq_or_any(self.num_pipe_ops, q.num_pipe_ops)
            && eq_or_any(self.reg_buff, i32::from(q.reg_buff))
    }

    /// The row's algorithm and protocol.
    pub fn algo_proto(&self) -> AlgoProto {
        AlgoProto {
            algorithm: self.algorithm,
            protocol: self.protocol,
        }
    }

    /// The CSV line (all ten fields).
    pub fn to_line(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{},{}",
            tuner_coll_name(self.op).unwrap_or("allreduce"),
            self.min_bytes,
            self.max_bytes,
            self.algorithm.csv_name(),
            self.protocol.csv_name(),
            self.channels,
            self.n_nodes,
            self.n_ranks,
            self.num_pipe_ops,
            self.reg_buff
        )
    }
}

impl TunerConfig {
    /// The first row that matches `q` and whose algorithm/protocol NCCL
    /// offers for this call (`available`: NCCL's cost table entry is not
    /// `NCCL_ALGO_PROTO_IGNORE`). A matching row whose pair is not
    /// available is passed over and the search goes on, as in the example
    /// plugin. With `None`, NCCL keeps its own choice, except that the
    /// example plugin then sets 1 channel (it writes `*nChannels = 1`
    /// before searching), while collbench's plugin leaves it alone.
    pub fn lookup(
        &self,
        q: &TunerQuery,
        available: impl Fn(AlgoProto) -> bool,
    ) -> Option<(usize, &TunerRow)> {
        self.rows
            .iter()
            .enumerate()
            .find(|(_, r)| r.matches(q) && available(r.algo_proto()))
    }

    /// Parses a whole file; every malformed line is reported.
    pub fn parse(text: &str) -> Result<TunerConfig, TunerCsvErrors> {
        let mut rows = Vec::new();
        let mut errors = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            match parse_line(raw, i + 1) {
                Ok(Some(row)) => rows.push(row),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(TunerConfig { rows })
        } else {
            Err(TunerCsvErrors(errors))
        }
    }

    /// The file: the format line, `notes` as comments, then the rows.
    pub fn to_csv(&self, notes: &[String]) -> String {
        let mut out = String::from(FORMAT_LINE);
        out.push('\n');
        for n in notes {
            for l in n.lines() {
                out.push_str("# ");
                out.push_str(l);
                out.push('\n');
            }
        }
        for r in &self.rows {
            out.push_str(&r.to_line());
            out.push('\n');
        }
        out
    }

    /// The rows for every band whose gain the CSV can express, for the
    /// topology the report measured (exact `nNodes` and `nRanks`; any
    /// `numPipeOps` and `regBuff`); adjacent bands with the same rule are
    /// merged. Returns notes (as comment text) for gains the CSV cannot
    /// express: registration and CTA policy are not per-call choices, and a
    /// channel count alone needs the algorithm/protocol NCCL ran, which the
    /// measurer may not have told.
    pub fn from_report(report: &TuneReport) -> (TunerConfig, Vec<String>) {
        let mut rows: Vec<TunerRow> = Vec::new();
        let mut notes = Vec::new();
        for b in &report.bands {
            let Outcome::Gain {
                setting,
                algo_proto,
                ..
            } = &b.outcome
            else {
                continue;
            };
            let where_ = format!(
                "{} {}-{} bytes ({setting})",
                b.band.op.name(),
                b.band.min_bytes,
                b.band.max_bytes
            );
            if tuner_coll_name(b.band.op).is_none() {
                notes.push(format!(
                    "{where_}: NCCL's tuner interface does not cover {}",
                    b.band.op.name()
                ));
                continue;
            };
            let needs = if !setting.env.is_empty() {
                Some("environment variables NCCL reads once per process (collbench tune --shell prints them)")
            } else if setting.registration != Registration::None {
                Some("buffer registration, which the application does")
            } else if setting.cta_policy != CtaPolicy::Default {
                Some("a CTA policy, which the application sets (NCCL_CTA_POLICY or ncclConfig_t)")
            } else {
                None
            };
            if let Some(needs) = needs {
                notes.push(format!("{where_}: needs {needs}, not the tuner"));
                continue;
            }
            let ap = match (setting.algorithm, setting.protocol, algo_proto) {
                (Some(algorithm), Some(protocol), _) => AlgoProto {
                    algorithm,
                    protocol,
                },
                (None, None, Some(ap)) => *ap,
                _ => {
                    notes.push(format!(
                        "{where_}: the algorithm/protocol NCCL ran is unknown, so no row"
                    ));
                    continue;
                }
            };
            let row = TunerRow {
                op: b.band.op,
                min_bytes: b.band.min_bytes,
                max_bytes: b.band.max_bytes,
                algorithm: ap.algorithm,
                protocol: ap.protocol,
                channels: setting.channels.map_or(-1, |n| n as i32),
                n_nodes: report.n_nodes as i32,
                n_ranks: report.world_size as i32,
                num_pipe_ops: -1,
                reg_buff: -1,
            };
            match rows.last_mut() {
                Some(prev)
                    if prev.max_bytes.checked_add(1) == Some(row.min_bytes)
                        && TunerRow {
                            min_bytes: row.min_bytes,
                            max_bytes: row.max_bytes,
                            ..prev.clone()
                        } == row =>
                {
                    prev.max_bytes = row.max_bytes;
                }
                _ => rows.push(row),
            }
        }
        (TunerConfig { rows }, notes)
    }
}

/// One line: `Ok(None)` for comments and blank lines.
fn parse_line(raw: &str, line: usize) -> Result<Option<TunerRow>, TunerCsvError> {
    let text = raw.strip_suffix('\r').unwrap_or(raw);
    if text.starts_with('#') || text.trim().is_empty() {
        return Ok(None);
    }
    let f = Fields::split(text, line)?;
    let op = tuner_coll_from_name(f.fields[0]).ok_or_else(|| {
        f.err(
            format!("collective_type '{}' is not known", f.fields[0]),
            "broadcast, reduce, allgather, reducescatter, allreduce",
        )
    })?;
    let (min_bytes, max_bytes) = (f.bytes(1)?, f.bytes(2)?);
    if min_bytes > max_bytes {
        return Err(f.err(
            format!("min_bytes {min_bytes} is above max_bytes {max_bytes}"),
            "min_bytes <= max_bytes",
        ));
    }
    let algorithm = Algorithm::from_csv(f.fields[3]).ok_or_else(|| {
        f.err(
            format!("algorithm '{}' is not known", f.fields[3]),
            "tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat",
        )
    })?;
    let protocol = Protocol::from_csv(f.fields[4]).ok_or_else(|| {
        f.err(
            format!("protocol '{}' is not known", f.fields[4]),
            "ll, ll128, simple",
        )
    })?;
    let positive_or_any = |v: i32| v == -1 || v >= 1;
    Ok(Some(TunerRow {
        op,
        min_bytes,
        max_bytes,
        algorithm,
        protocol,
        channels: f.int(
            5,
            &positive_or_any,
            "a channel count of 1 or more, or -1 for NCCL's choice",
        )?,
        n_nodes: f.int(
            6,
            &positive_or_any,
            "a node count of 1 or more, or -1 for any",
        )?,
        n_ranks: f.int(
            7,
            &positive_or_any,
            "a rank count of 1 or more, or -1 for any",
        )?,
        num_pipe_ops: f.optional_int(
            8,
            &positive_or_any,
            "an operation count of 1 or more, or -1 for any",
        )?,
        reg_buff: f.optional_int(
            9,
            &|v| (-1..=1).contains(&v),
            "0 (unregistered), 1 (registered) or -1 (either)",
        )?,
    }))
}

/// The fields of one rule line, checked for shape, with the line number
/// every error about them names.
struct Fields<'a> {
    fields: Vec<&'a str>,
    line: usize,
}

impl<'a> Fields<'a> {
    /// Splits rule line `text` (not a comment, not blank) at its commas,
    /// refusing what NCCL's example tuner would misread: a comment not in
    /// the first column, a line it would split, too few or too many
    /// fields, an empty field.
    fn split(text: &'a str, line: usize) -> Result<Fields<'a>, TunerCsvError> {
        let mut f = Fields {
            fields: Vec::new(),
            line,
        };
        if text.trim_start().starts_with('#') {
            return Err(f.err(
                "comment does not start in the first column (NCCL's example tuner would read it as a rule)".into(),
                "'#' as the very first character of a comment line",
            ));
        }
        if text.len() > MAX_LINE_CHARS {
            return Err(f.err(
                format!(
                    "line is {} characters long (NCCL's example tuner would split it)",
                    text.len()
                ),
                &format!("at most {MAX_LINE_CHARS} characters per line"),
            ));
        }
        f.fields = text
            .split(',')
            .map(|f| f.trim_matches([' ', '\t']))
            .collect();
        if !(8..=10).contains(&f.fields.len()) {
            return Err(f.err(
                format!("{} fields", f.fields.len()),
                "8 fields (collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks), 9 (+numPipeOps) or 10 (+regBuff)",
            ));
        }
        if let Some(k) = f.fields.iter().position(|f| f.is_empty()) {
            return Err(f.err(
                format!("field {} ({}) is empty", k + 1, FIELD_NAMES[k]),
                "a value in every field",
            ));
        }
        Ok(f)
    }

    /// An error about this line: what is wrong, and what is allowed.
    fn err(&self, problem: String, allowed: &str) -> TunerCsvError {
        TunerCsvError {
            line: self.line,
            problem,
            allowed: allowed.to_string(),
        }
    }

    /// Field `k` as a whole number of bytes (decimal digits only).
    fn bytes(&self, k: usize) -> Result<u64, TunerCsvError> {
        let field = self.fields[k];
        field
            .parse::<u64>()
            .ok()
            .filter(|_| field.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| {
                self.err(
                    format!(
                        "{} '{field}' is not a whole number of bytes",
                        FIELD_NAMES[k]
                    ),
                    "decimal digits only (no suffix), 0 to 18446744073709551615",
                )
            })
    }

    /// Field `k` as an integer that `ok` accepts (`allowed` says which).
    fn int(&self, k: usize, ok: &dyn Fn(i32) -> bool, allowed: &str) -> Result<i32, TunerCsvError> {
        let field = self.fields[k];
        field.parse::<i32>().ok().filter(|v| ok(*v)).ok_or_else(|| {
            self.err(
                format!("{} '{field}' is out of range", FIELD_NAMES[k]),
                allowed,
            )
        })
    }

    /// Optional field `k` (numPipeOps, regBuff) as [`Fields::int`]
    /// reads it; -1 (match anything) where the line stops before it.
    fn optional_int(
        &self,
        k: usize,
        ok: &dyn Fn(i32) -> bool,
        allowed: &str,
    ) -> Result<i32, TunerCsvError> {
        match self.fields.get(k) {
            Some(_) => self.int(k, ok, allowed),
            None => Ok(-1),
        }
    }
}
