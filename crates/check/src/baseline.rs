//! Baselines: what a healthy system of some kind measures, as a TOML file
//! (format in `docs/baselines.md`), built-in or the user's own.
//!
//! A baseline states, per collective, the bus bandwidth expected at one
//! size, and optionally the longest acceptable time at a small size. It
//! also says where its figures come from, so a verdict can be traced back
//! to a document or a measurement.

use crate::error::CheckError;
use collbench_core::bounds::{positive_at_most, MAX_GBPS, MAX_RANKS, MAX_TIME_US};
use collbench_core::read_limit::{self, ReadLimitError};
use collbench_core::{size::parse_size, Collective, DataType};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A system's expected figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// Short name (`h200x2`), used with `--baseline NAME`.
    pub name: String,
    /// One line on what system this is.
    #[serde(default)]
    pub description: String,
    /// GPUs (ranks) per node the figures were measured with.
    pub gpus_per_node: u32,
    /// Nodes the figures were measured with.
    pub nodes: u32,
    /// Interconnect in words (`NVLink 4 (NV18)`, `RoCE 4x200G`).
    #[serde(default)]
    pub interconnect: String,
    /// Where the figures come from: document, URL or measurement.
    pub source: String,
    /// Measured/expected at or above this passes (default 0.9).
    #[serde(default = "default_warn")]
    pub warn_fraction: f64,
    /// Measured/expected below this fails; in between warns (default 0.75).
    #[serde(default = "default_fail")]
    pub fail_fraction: f64,
    /// Expected figures, one entry per collective (and data type).
    #[serde(default)]
    pub expect: Vec<Expect>,
}

fn default_warn() -> f64 {
    0.9
}

fn default_fail() -> f64 {
    0.75
}

/// One collective's expected figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Collective name (`all_reduce`, `all_gather`, ...).
    pub op: String,
    /// Size the bandwidth figure was measured at (`8G`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// Expected out-of-place bus bandwidth at `size`, GB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busbw_gbps: Option<f64>,
    /// Data type (default `float`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// Small size for the latency figure (`8`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub small_size: Option<String>,
    /// Longest acceptable time at `small_size`, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_time_us: Option<f64>,
}

/// A bandwidth expectation, parsed and checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BusbwExpect {
    pub collective: Collective,
    pub dtype: DataType,
    pub size_bytes: u64,
    pub busbw_gbps: f64,
}

/// A latency expectation, parsed and checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyExpect {
    pub collective: Collective,
    pub dtype: DataType,
    pub size_bytes: u64,
    pub max_time_us: f64,
}

/// The built-in baselines: (file name, TOML text). One file each, so a
/// user can copy one with `collbench baselines show NAME > mine.toml`.
const BUILT_IN: &[&str] = &[
    include_str!("../baselines/h200x2.toml"),
    include_str!("../baselines/cpu-ci.toml"),
    include_str!("../baselines/gke-a4x-2node.toml"),
    include_str!("../baselines/gke-a4-2node.toml"),
    include_str!("../baselines/gke-a3-ultra-2node.toml"),
    include_str!("../baselines/gke-a3-mega-2node.toml"),
    include_str!("../baselines/gke-a3-high-2node.toml"),
    include_str!("../baselines/volc-hpcpni2-1node.toml"),
    include_str!("../baselines/volc-hpcpni2-2node.toml"),
    include_str!("../baselines/volc-ebmhpcpni2l-1node.toml"),
    include_str!("../baselines/volc-ebmhpcpni2l-2node.toml"),
    include_str!("../baselines/volc-ebmhpcpni2l-16node.toml"),
    include_str!("../baselines/volc-ebmhpcpni2l-64node.toml"),
    include_str!("../baselines/volc-ebmhpcpni3l-1node.toml"),
    include_str!("../baselines/volc-ebmhpcpni3l-2node.toml"),
    include_str!("../baselines/volc-hpcpni3ln-2node.toml"),
    include_str!("../baselines/volc-hpcpni3ln-4node.toml"),
    include_str!("../baselines/trn1-32xlarge.toml"),
];

/// Every built-in baseline, with its TOML text, in listing order.
pub fn built_in() -> Vec<(Baseline, &'static str)> {
    BUILT_IN
        .iter()
        .map(|text| {
            let b = Baseline::parse(text, "built-in baseline")
                .expect("built-in baselines are valid (checked by a unit test)");
            (b, *text)
        })
        .collect()
}

/// Finds a built-in baseline by name; the error lists the known names.
pub fn find_built_in(name: &str) -> Result<(Baseline, &'static str), CheckError> {
    let all = built_in();
    let known: Vec<String> = all.iter().map(|(b, _)| b.name.clone()).collect();
    all.into_iter()
        .find(|(b, _)| b.name == name)
        .ok_or_else(|| CheckError::UnknownBaseline {
            name: name.to_string(),
            known,
        })
}

/// `--baseline NAME|FILE`: a path that exists (or ends in `.toml`) is read
/// as a file, anything else is a built-in name.
pub fn load(name_or_file: &str) -> Result<Baseline, CheckError> {
    let path = Path::new(name_or_file);
    if path.exists() || name_or_file.ends_with(".toml") {
        // Bounded: `--baseline /dev/zero` once grew without end.
        let text = read_limit::read_to_string(path, read_limit::SETTINGS_BYTES, "a baseline")
            .map_err(|e| match e {
                ReadLimitError::Io { .. } => CheckError::BaselineUnreadable {
                    file: name_or_file.to_string(),
                    source: e,
                },
                e => CheckError::BaselineFile(e),
            })?;
        return Baseline::parse(&text, name_or_file);
    }
    find_built_in(name_or_file).map(|(b, _)| b)
}

impl Baseline {
    /// Parses and validates TOML; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Baseline, CheckError> {
        let b: Baseline = toml::from_str(text).map_err(|e| {
            // toml's message spans lines; keep the first, which names the key.
            let msg = e.to_string();
            CheckError::BaselineSyntax {
                origin: origin.to_string(),
                first: msg.lines().next().unwrap_or("invalid TOML").to_string(),
                detail: msg.lines().last().unwrap_or("").trim().to_string(),
            }
        })?;
        b.validate()
            .and_then(|()| b.refuse_duplicates(text))
            .map_err(|problem| CheckError::BaselineInvalid {
                origin: origin.to_string(),
                name: b.name.clone(),
                problem: Box::new(problem),
            })?;
        Ok(b)
    }

    /// Two entries for the same op and data type: the second was silently
    /// ignored, so it is refused, naming both entries by their line.
    fn refuse_duplicates(&self, text: &str) -> Result<(), CheckError> {
        // Where each `[[expect]]` table starts; an inline array has none,
        // and then entries are named by their number.
        let starts: Vec<usize> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.trim_start().starts_with("[[expect]]"))
            .map(|(i, _)| i + 1)
            .collect();
        let place = |k: usize| match starts.get(k) {
            Some(line) if starts.len() == self.expect.len() => format!("line {line}"),
            _ => format!("entry {}", k + 1),
        };
        let mut seen: Vec<(Collective, DataType, usize)> = Vec::new();
        for (k, e) in self.expect.iter().enumerate() {
            let (collective, busbw, latency) = e.parse()?;
            let dtype = busbw
                .map(|b| b.dtype)
                .or(latency.map(|l| l.dtype))
                .unwrap_or(DataType::Float);
            if let Some((_, _, first)) = seen
                .iter()
                .find(|(c, d, _)| *c == collective && *d == dtype)
            {
                return Err(entry(format!(
                    "{collective} ({dtype}) has two [[expect]] entries, at {} and {}: keep one per op and data type (one entry holds both size + busbw_gbps and small_size + max_time_us)",
                    place(*first),
                    place(k)
                )));
            }
            seen.push((collective, dtype, k));
        }
        Ok(())
    }

    /// The fractions in order, and every entry usable.
    fn validate(&self) -> Result<(), CheckError> {
        if !(0.0 < self.fail_fraction
            && self.fail_fraction <= self.warn_fraction
            && self.warn_fraction <= 1.0)
        {
            return Err(entry(format!(
                "fractions must satisfy 0 < fail_fraction ({}) <= warn_fraction ({}) <= 1",
                self.fail_fraction, self.warn_fraction
            )));
        }
        if self.gpus_per_node == 0 || self.nodes == 0 || self.world_size() > MAX_RANKS {
            return Err(entry(format!(
                "gpus_per_node = {} and nodes = {} describe no machine: give each 1 or more, at most {MAX_RANKS} GPUs in all",
                self.gpus_per_node, self.nodes
            )));
        }
        if self.expect.is_empty() {
            return Err(entry(
                "no [[expect]] entries: add at least one op with size and busbw_gbps",
            ));
        }
        for e in &self.expect {
            e.parse()?;
        }
        self.busbw()?;
        self.latency()?;
        Ok(())
    }

    /// Ranks the figures were measured with.
    pub fn world_size(&self) -> u64 {
        self.gpus_per_node as u64 * self.nodes as u64
    }

    /// Bandwidth expectations, in file order.
    pub fn busbw(&self) -> Result<Vec<BusbwExpect>, CheckError> {
        let mut out = Vec::new();
        for e in &self.expect {
            if let (_, Some(b), _) = e.parse()? {
                out.push(b);
            }
        }
        Ok(out)
    }

    /// Latency expectations, in file order.
    pub fn latency(&self) -> Result<Vec<LatencyExpect>, CheckError> {
        let mut out = Vec::new();
        for e in &self.expect {
            if let (_, _, Some(l)) = e.parse()? {
                out.push(l);
            }
        }
        Ok(out)
    }

    /// The size most figures are stated at (the first bandwidth entry's).
    pub fn stated_size(&self) -> Option<u64> {
        self.busbw().ok()?.first().map(|b| b.size_bytes)
    }
}

impl Expect {
    /// The collective, and the bandwidth and latency expectations this
    /// entry holds (either or both).
    pub fn parse(
        &self,
    ) -> Result<(Collective, Option<BusbwExpect>, Option<LatencyExpect>), CheckError> {
        let collective = Collective::parse(&self.op).map_err(|e| entry(e.to_string()))?;
        let dtype = match &self.dtype {
            Some(d) => DataType::parse(d).map_err(|e| entry(e.to_string()))?,
            None => DataType::Float,
        };
        let busbw = self.pair(
            (&self.size, "size"),
            (self.busbw_gbps, "busbw_gbps"),
            (MAX_GBPS, "GB/s", ""),
        )?;
        let latency = self.pair(
            (&self.small_size, "small_size"),
            (self.max_time_us, "max_time_us"),
            (MAX_TIME_US, "microseconds", " (an hour)"),
        )?;
        let busbw = busbw.map(|(size_bytes, busbw_gbps)| BusbwExpect {
            collective,
            dtype,
            size_bytes,
            busbw_gbps,
        });
        let latency = latency.map(|(size_bytes, max_time_us)| LatencyExpect {
            collective,
            dtype,
            size_bytes,
            max_time_us,
        });
        if busbw.is_none() && latency.is_none() {
            return Err(entry(format!(
                "{}: an [[expect]] entry needs size + busbw_gbps, or small_size + max_time_us",
                self.op
            )));
        }
        Ok((collective, busbw, latency))
    }
}

impl Expect {
    /// A size and its figure, both in range, or neither. The bounds are
    /// [`collbench_core::bounds`]': `busbw_gbps = inf` (or `1e308`) failed
    /// every machine, `max_time_us = inf` passed every one, and a size of
    /// `'0'` measured nothing.
    fn pair(
        &self,
        (size, size_name): (&Option<String>, &str),
        (figure, figure_name): (Option<f64>, &str),
        (max, unit, max_is): (f64, &str, &str),
    ) -> Result<Option<(u64, f64)>, CheckError> {
        let op = &self.op;
        let (s, v) = match (size, figure) {
            (Some(s), Some(v)) => (s, v),
            (None, None) => return Ok(None),
            _ => {
                return Err(entry(format!(
                    "{op}: give both {size_name} and {figure_name} (a positive number), or neither"
                )))
            }
        };
        if !positive_at_most(v, max) {
            // 1e308 as written, not as 309 digits.
            let shown = if v.abs() >= 1e9 {
                format!("{v:e}")
            } else {
                v.to_string()
            };
            return Err(entry(format!(
                "{op}: {figure_name} = {shown} is no figure a machine has: give {unit} above 0 and at most {max}{max_is}"
            )));
        }
        match parse_size(s) {
            Ok(0) => Err(entry(format!(
                "{op}: {size_name} = '{s}' measures nothing: give a size of at least 1 byte, e.g. '64M'"
            ))),
            Ok(bytes) => Ok(Some((bytes, v))),
            Err(e) => Err(entry(format!("{op}: {e}"))),
        }
    }
}

/// What is wrong inside a baseline, as its error.
fn entry(problem: impl Into<String>) -> CheckError {
    CheckError::BaselineEntry(problem.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_parses_and_names_are_unique() {
        let all = built_in();
        assert!(all.len() >= 15);
        let mut names: Vec<&str> = all.iter().map(|(b, _)| b.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len(), "duplicate baseline names");
        for (b, _) in &all {
            assert!(!b.source.is_empty(), "{} has no source", b.name);
            assert!(b.world_size() > 0, "{}", b.name);
            assert!(!b.busbw().unwrap().is_empty(), "{}", b.name);
        }
    }

    #[test]
    fn h200x2_holds_the_anchor_figures() {
        let b = load("h200x2").unwrap();
        let ar = b.busbw().unwrap()[0];
        assert_eq!(ar.collective, Collective::AllReduce);
        assert_eq!(ar.size_bytes, 8 << 30);
        assert_eq!(ar.busbw_gbps, 349.6);
        assert_eq!(b.latency().unwrap()[0].size_bytes, 8);
        assert_eq!(b.world_size(), 2);
    }

    #[test]
    fn defaults_and_validation() {
        let ok = "name='x'\ngpus_per_node=1\nnodes=1\nsource='me'\n[[expect]]\nop='all_reduce'\nsize='4M'\nbusbw_gbps=1.5\n";
        let b = Baseline::parse(ok, "t").unwrap();
        assert_eq!((b.warn_fraction, b.fail_fraction), (0.9, 0.75));
        assert_eq!(b.busbw().unwrap()[0].dtype, DataType::Float);

        let half = ok.replace("busbw_gbps=1.5\n", "");
        let e = Baseline::parse(&half, "t").unwrap_err();
        assert!(
            format!("{e:#}").contains("both size and busbw_gbps"),
            "{e:#}"
        );

        let bad_op = ok.replace("all_reduce", "allreduce_x");
        let e = Baseline::parse(&bad_op, "t").unwrap_err();
        assert!(format!("{e:#}").contains("allreduce_x"), "{e:#}");

        let bad_frac = ok.replace("source='me'", "source='me'\nwarn_fraction=0.5");
        assert!(Baseline::parse(&bad_frac, "t").is_err());

        let typo = ok.replace("busbw_gbps", "busbw");
        let e = Baseline::parse(&typo, "t").unwrap_err();
        assert!(format!("{e:#}").contains("busbw"), "{e:#}");
    }

    #[test]
    fn figures_no_machine_has_are_refused_naming_the_field_and_the_range() {
        let ok = "name='x'\ngpus_per_node=1\nnodes=1\nsource='me'\n[[expect]]\nop='all_reduce'\nsize='4M'\nbusbw_gbps=1.5\nsmall_size='8'\nmax_time_us=20\n";
        Baseline::parse(ok, "t").unwrap();
        for (from, to, says) in [
            ("busbw_gbps=1.5", "busbw_gbps=inf", "busbw_gbps = inf"),
            (
                "busbw_gbps=1.5",
                "busbw_gbps=1e308",
                "busbw_gbps = 1e308 is no figure",
            ),
            ("busbw_gbps=1.5", "busbw_gbps=nan", "busbw_gbps = NaN"),
            ("busbw_gbps=1.5", "busbw_gbps=-1", "above 0"),
            ("max_time_us=20", "max_time_us=inf", "max_time_us = inf"),
            ("max_time_us=20", "max_time_us=0", "above 0"),
            ("size='4M'", "size='0'", "size = '0' measures nothing"),
            (
                "small_size='8'",
                "small_size='0'",
                "small_size = '0' measures nothing",
            ),
            ("nodes=1", "nodes=0", "describe no machine"),
            (
                "gpus_per_node=1",
                "gpus_per_node=4294967295",
                "describe no machine",
            ),
        ] {
            let bad = ok.replace(from, to);
            let e = format!("{:#}", Baseline::parse(&bad, "t").unwrap_err());
            assert!(e.contains(says), "{to}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn an_op_given_twice_is_refused_naming_both_lines() {
        let text = "name='x'\ngpus_per_node=1\nnodes=1\nsource='me'\n\n[[expect]]\nop='all_reduce'\nsize='4M'\nbusbw_gbps=1.5\n\n[[expect]]\nop='all_gather'\nsize='4M'\nbusbw_gbps=1\n\n[[expect]]\nop='all_reduce'\nsize='8M'\nbusbw_gbps=2\n";
        let e = format!("{:#}", Baseline::parse(text, "b.toml").unwrap_err());
        assert!(
            e.contains("all_reduce (float) has two [[expect]] entries, at line 6 and line 16"),
            "{e}"
        );
        // Another data type of the same op is another entry.
        let ok = text.replacen(
            "op='all_reduce'\nsize='8M'",
            "op='all_reduce'\ndtype='half'\nsize='8M'",
            1,
        );
        assert!(Baseline::parse(&ok, "b.toml").is_ok());
    }

    #[test]
    fn unknown_name_lists_the_known_ones() {
        let e = load("no-such-system").unwrap_err().to_string();
        assert!(e.contains("unknown baseline 'no-such-system'"), "{e}");
        assert!(e.contains("h200x2") && e.contains("cpu-ci"), "{e}");
    }
}
