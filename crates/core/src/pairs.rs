//! The pairwise bandwidth matrix: what `collbench check` measures between
//! ranks (and writes to its JSON as `localization.matrix`) and what
//! `collbench report --matrix` draws as a heatmap. One type, so the writer
//! and the reader cannot drift apart.

use serde::{Deserialize, Serialize};

/// Rank x rank sendrecv bandwidth (GB/s); `None` where not measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairMatrix {
    /// One label per rank (`r3@host`).
    pub labels: Vec<String>,
    /// Symmetric; the diagonal and untested pairs are `None` (`null`).
    pub gbps: Vec<Vec<Option<f64>>>,
}

impl PairMatrix {
    /// An empty matrix over `labels`.
    pub fn new(labels: Vec<String>) -> PairMatrix {
        let n = labels.len();
        PairMatrix {
            labels,
            gbps: vec![vec![None; n]; n],
        }
    }

    /// Records the bandwidth of pair (a, b), both ways.
    pub fn set(&mut self, a: usize, b: usize, v: f64) {
        self.gbps[a][b] = Some(v);
        self.gbps[b][a] = Some(v);
    }

    /// Measured pairs (a < b) with their bandwidth.
    pub fn pairs(&self) -> Vec<(usize, usize, f64)> {
        let n = self.labels.len();
        let mut out = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                if let Some(v) = self.gbps[a][b] {
                    out.push((a, b, v));
                }
            }
        }
        out
    }

    /// Whether `gbps` is square over `labels` (a matrix read from a file
    /// may not be).
    pub fn is_square(&self) -> bool {
        let n = self.labels.len();
        self.gbps.len() == n && self.gbps.iter().all(|row| row.len() == n)
    }
}

/// The part of `collbench check --json` that holds the matrix: the JSON
/// file's `localization` object, of which readers need only `matrix`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckMatrixFile {
    /// Absent when the check made no pairwise tests.
    #[serde(default)]
    pub localization: Option<LocalizationMatrix>,
    /// Absent when the check made no host tests (one process).
    #[serde(default)]
    pub hosts: Option<HostMatrixFile>,
}

/// `hosts` in `collbench check --json` (host tests of a job of several
/// processes), as far as readers need it: the hosts' names and the
/// host-pair matrix's measured cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostMatrixFile {
    pub hosts: Vec<HostName>,
    pub verdict: HostVerdictMatrix,
}

/// A host of [`HostMatrixFile`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostName {
    pub name: String,
}

/// `hosts.verdict` as far as the matrix goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostVerdictMatrix {
    pub matrix: HostPairs,
    /// `hosts.verdict.threshold`: the cut the verdict judged host scores
    /// by; absent when the job was not judged (or from older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<VerdictCut>,
}

/// The part of the host verdict's threshold readers need: `cut`, a ratio
/// to the job median below which a host is slow.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VerdictCut {
    pub cut: f64,
}

/// `hosts.verdict.matrix`: the measured host pairs (sparse).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostPairs {
    pub pairs: Vec<HostPairCell>,
}

/// One measured host pair: its best busbw, GB/s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostPairCell {
    pub a: usize,
    pub b: usize,
    pub busbw_gbps: f64,
}

impl HostMatrixFile {
    /// The host x host matrix (symmetric; untested pairs `None`).
    pub fn to_matrix(&self) -> PairMatrix {
        let mut m = PairMatrix::new(self.hosts.iter().map(|h| h.name.clone()).collect());
        let n = self.hosts.len();
        for c in self
            .verdict
            .matrix
            .pairs
            .iter()
            .filter(|c| c.a < n && c.b < n)
        {
            m.set(c.a, c.b, c.busbw_gbps);
        }
        m
    }
}

/// `localization` in `collbench check --json`, as far as readers need it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalizationMatrix {
    pub matrix: PairMatrix,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_is_symmetric_and_round_trips_through_json() {
        let mut m = PairMatrix::new(vec!["r0".into(), "r1".into(), "r2".into()]);
        m.set(0, 2, 12.5);
        assert_eq!(m.pairs(), vec![(0, 2, 12.5)]);
        assert_eq!(m.gbps[2][0], Some(12.5));
        let json =
            serde_json::json!({"verdicts": [], "localization": {"method": "x", "matrix": m}});
        let back: CheckMatrixFile = serde_json::from_value(json).unwrap();
        assert_eq!(back.localization.unwrap().matrix, m);
        assert!(m.is_square());
    }

    #[test]
    fn host_pairs_make_a_symmetric_host_matrix() {
        let json = serde_json::json!({"hosts": {
            "hosts": [{"name": "n0", "ranks": {"start": 0, "end": 1}}, {"name": "n1"}, {"name": "n2"}],
            "verdict": {"status": "FAIL", "matrix": {"reference_gbps": 2.0,
                "pairs": [{"a": 0, "b": 2, "busbw_gbps": 0.2, "ratio": 0.1}]}}}});
        let back: CheckMatrixFile = serde_json::from_value(json).unwrap();
        let m = back.hosts.unwrap().to_matrix();
        assert_eq!(m.labels, ["n0", "n1", "n2"]);
        assert_eq!(m.gbps[2][0], Some(0.2));
        assert_eq!(m.gbps[0][1], None);
    }

    #[test]
    fn a_check_without_pairs_has_no_matrix() {
        let back: CheckMatrixFile = serde_json::from_str(r#"{"verdicts": []}"#).unwrap();
        assert_eq!(back.localization, None);
    }
}
