//! The host-pair matrix (each pair's best figure, for the JSON output and
//! the report's heatmap) built from the pair results, and its text
//! rendering. The lowest file of the host verdict but for [`super::noise`]:
//! it imports nothing else of it.

use super::noise::median;
use serde::Serialize;
use std::collections::BTreeMap;
use std::ops::Range;

/// Beyond this many hosts the text shows the slowest hosts, not a grid.
const GRID_MAX: usize = 32;

/// One measured pair: busbw between hosts `a` and `b` in a round. Only
/// tests that ran are pair results: one that failed has no figure, and a
/// missing figure is never a slow one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairResult {
    pub a: usize,
    pub b: usize,
    pub round: usize,
    /// Bus bandwidth of the pair test, GB/s.
    pub busbw_gbps: f64,
}

/// A host as the findings name it: `n3 (ranks 8-15)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostInfo {
    pub name: String,
    /// The ranks on this host.
    pub ranks: Range<usize>,
}

impl HostInfo {
    /// `n3 (ranks 8-15)`, `n3 (rank 8)`.
    pub fn label(&self) -> String {
        match self.ranks.len() {
            0 => self.name.clone(),
            1 => format!("{} (rank {})", self.name, self.ranks.start),
            _ => format!(
                "{} (ranks {}-{})",
                self.name,
                self.ranks.start,
                self.ranks.end - 1
            ),
        }
    }
}

/// One host's row: its fastest pair and score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostScore {
    pub host: usize,
    /// Fastest pair, GB/s (`None`: the host was in no pair).
    pub best_gbps: Option<f64>,
    /// `best_gbps` over the job median.
    pub score: Option<f64>,
    /// Pairs it was measured in.
    pub pairs: usize,
}

/// One measured pair (a < b): its best figure over `tests` tests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairCell {
    pub a: usize,
    pub b: usize,
    /// Best of the tests, GB/s: interference only ever lowers a figure.
    pub busbw_gbps: f64,
    /// `busbw_gbps` over the job median.
    pub ratio: f64,
    pub tests: usize,
    /// The last round it was tested in.
    pub last_round: usize,
}

/// The host-pair matrix, sparse: large jobs measure few of the H^2 pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostMatrix {
    /// Median over hosts of each host's fastest pair, GB/s.
    pub reference_gbps: f64,
    pub hosts: Vec<HostScore>,
    pub pairs: Vec<PairCell>,
}

impl HostMatrix {
    /// Collects `results` of a job of `hosts` hosts. Pairs naming a host
    /// outside the job, or a host with itself, and figures that are not
    /// numbers are left out.
    pub fn from_results(results: &[PairResult], hosts: usize) -> HostMatrix {
        let mut best: BTreeMap<(usize, usize), (f64, usize, usize)> = BTreeMap::new();
        // A garbled figure (not a number) is no measurement: left out,
        // as a failed test is, never read as a slow pair.
        for r in results
            .iter()
            .filter(|r| r.a != r.b && r.a.max(r.b) < hosts && r.busbw_gbps.is_finite())
        {
            let v = r.busbw_gbps.max(0.0);
            let key = (r.a.min(r.b), r.a.max(r.b));
            let cell = best.entry(key).or_insert((v, 0, r.round));
            cell.0 = cell.0.max(v);
            cell.1 += 1;
            cell.2 = cell.2.max(r.round);
        }
        let mut host_best: Vec<Option<f64>> = vec![None; hosts];
        let mut host_pairs = vec![0; hosts];
        for (&(a, b), &(v, _, _)) in &best {
            for h in [a, b] {
                host_best[h] = Some(host_best[h].map_or(v, |x: f64| x.max(v)));
                host_pairs[h] += 1;
            }
        }
        let mut bests: Vec<f64> = host_best.iter().flatten().copied().collect();
        let reference = median(&mut bests);
        let ratio = |v: f64| if reference > 0.0 { v / reference } else { 0.0 };
        HostMatrix {
            reference_gbps: reference,
            hosts: (0..hosts)
                .map(|h| HostScore {
                    host: h,
                    best_gbps: host_best[h],
                    score: host_best[h].map(ratio),
                    pairs: host_pairs[h],
                })
                .collect(),
            pairs: best
                .into_iter()
                .map(|((a, b), (v, tests, last_round))| PairCell {
                    a,
                    b,
                    busbw_gbps: v,
                    ratio: ratio(v),
                    tests,
                    last_round,
                })
                .collect(),
        }
    }

    /// Whether pair (a, b) was measured.
    pub fn measured(&self, a: usize, b: usize) -> bool {
        let key = (a.min(b), a.max(b));
        self.pairs
            .binary_search_by(|p| (p.a, p.b).cmp(&key))
            .is_ok()
    }

    /// The matrix as text: a grid of ratios for up to 32 hosts, else the
    /// ten slowest hosts by score. `hosts` names them (index if absent).
    pub fn text(&self, hosts: &[HostInfo]) -> String {
        let name = |h: usize| hosts.get(h).map_or(format!("h{h}"), |i| i.name.clone());
        let n = self.hosts.len();
        let mut out = format!(
            "host pairs: {} measured, job median {:.2} GB/s; cells: busbw / job median\n",
            self.pairs.len(),
            self.reference_gbps
        );
        if n <= GRID_MAX {
            let mut grid = vec![vec![None; n]; n];
            for p in &self.pairs {
                grid[p.a][p.b] = Some(p.ratio);
                grid[p.b][p.a] = Some(p.ratio);
            }
            let w = (0..n).map(|h| name(h).len()).max().unwrap_or(1).max(4);
            out += &format!("{:w$}", "");
            for h in 0..n {
                out += &format!(" {:>w$}", name(h));
            }
            out += "\n";
            for (a, row) in grid.iter().enumerate() {
                out += &format!("{:<w$}", name(a));
                for (b, cell) in row.iter().enumerate() {
                    let text = match cell {
                        _ if a == b => "-".to_string(),
                        None => ".".to_string(),
                        Some(r) => format!("{r:.2}"),
                    };
                    out += &format!(" {text:>w$}");
                }
                out += "\n";
            }
        } else {
            let mut rows: Vec<&HostScore> =
                self.hosts.iter().filter(|h| h.score.is_some()).collect();
            rows.sort_by(|x, y| x.score.unwrap_or(0.0).total_cmp(&y.score.unwrap_or(0.0)));
            out += &format!("slowest of {n} hosts (score: fastest pair / job median):\n");
            for h in rows.iter().take(10) {
                out += &format!(
                    "  {:<12} {:.2} over {} pairs\n",
                    name(h.host),
                    h.score.unwrap_or(0.0),
                    h.pairs
                );
            }
        }
        out
    }
}

/// Most rows of the per-pair table: the slowest pairs of a large job.
const PAIR_ROWS: usize = 64;

impl HostMatrix {
    /// The per-pair table beside the matrix, in the layout of nccl-tests'
    /// per-GPU-pair summary (its PR #376, docs/pr376-layout.md): a banner,
    /// the size the figures are from, then one row per measured pair,
    /// slowest first (at most 64): its number, hosts, best busbw, ratio to
    /// the job median as a percentage, tests, and `<<< SLOW` below `cut`
    /// (the verdict's cut), `OK` above it, `-` where no cut could be set
    /// (a job too noisy to judge). The PR's `vs_max` is against the best
    /// pair; here it is against the job median, which one fast pair cannot
    /// move. Lines come without their leading `# `.
    pub fn pair_table(&self, hosts: &[HostInfo], cut: Option<f64>, size_bytes: u64) -> String {
        let name = |h: usize| hosts.get(h).map_or(format!("h{h}"), |i| i.name.clone());
        let w = self
            .pairs
            .iter()
            .flat_map(|p| [name(p.a).len(), name(p.b).len()])
            .max()
            .unwrap_or(8)
            .max(8);
        let mut rows: Vec<&PairCell> = self.pairs.iter().collect();
        rows.sort_by(|x, y| x.ratio.total_cmp(&y.ratio));
        let mut out =
            String::from("\n============= Per-host-pair Bandwidth Breakdown =============\n\n");
        out += &format!("--- Summary (based on msg size: {size_bytes} bytes, sendrecv) ---\n");
        out += &format!(
            "{:>8}  {:>w$}  {:>w$}  {:>11}  {:>7}  {:>5}  Status\n",
            "Pair", "host", "peer", "busbw(GB/s)", "vs_med", "tests"
        );
        for (i, p) in rows.iter().take(PAIR_ROWS).enumerate() {
            let status = match cut {
                Some(c) if p.ratio < c => "<<< SLOW",
                Some(_) => "OK",
                None => "-",
            };
            out += &format!(
                "{i:>8}  {:>w$}  {:>w$}  {:>11.2}  {:>6.1}%  {:>5}  {status}\n",
                name(p.a),
                name(p.b),
                p.busbw_gbps,
                p.ratio * 100.0,
                p.tests,
            );
        }
        if rows.len() > PAIR_ROWS {
            out += &format!("({} faster pairs not shown)\n", rows.len() - PAIR_ROWS);
        }
        out += "\n==============================================================\n";
        out
    }
}

/// Pair results for the host tests' unit tests (here and in `verdict`).
#[cfg(test)]
pub(crate) mod fixtures {
    use super::PairResult;

    /// Every pair of `n` hosts once: 8.4 GB/s with host `slow`, else 40.
    pub(crate) fn job(n: usize, slow: usize) -> Vec<PairResult> {
        let mut out = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                let v = if a == slow || b == slow { 8.4 } else { 40.0 };
                out.push(PairResult {
                    a,
                    b,
                    round: 0,
                    busbw_gbps: v,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::job;
    use super::*;

    #[test]
    fn measured_finds_pairs_either_way_round() {
        let m = HostMatrix::from_results(&job(4, 9), 4);
        assert!(m.measured(2, 1) && m.measured(0, 3));
        assert!(!HostMatrix::from_results(&job(4, 9)[..1], 4).measured(2, 3));
    }

    #[test]
    fn the_pair_table_lists_the_slowest_first_and_marks_them() {
        let m = HostMatrix::from_results(&job(3, 2), 3);
        let hosts: Vec<HostInfo> = (0..3)
            .map(|h| HostInfo {
                name: format!("n{h}"),
                ranks: h..h + 1,
            })
            .collect();
        let t = m.pair_table(&hosts, Some(0.8), 1 << 26);
        let lines: Vec<&str> = t.lines().collect();
        // PR #376's banner, summary title and closing rule.
        assert_eq!(
            lines[1],
            "============= Per-host-pair Bandwidth Breakdown ============="
        );
        assert_eq!(
            lines[3],
            "--- Summary (based on msg size: 67108864 bytes, sendrecv) ---"
        );
        assert_eq!(
            lines.last(),
            Some(&"==============================================================")
        );
        let rows: Vec<Vec<&str>> = lines[4..]
            .iter()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[0],
            [
                "Pair",
                "host",
                "peer",
                "busbw(GB/s)",
                "vs_med",
                "tests",
                "Status"
            ]
        );
        assert_eq!(
            rows[1],
            ["0", "n0", "n2", "8.40", "21.0%", "1", "<<<", "SLOW"]
        );
        assert_eq!(rows[3], ["2", "n0", "n1", "40.00", "100.0%", "1", "OK"]);
        let unjudged = m.pair_table(&hosts, None, 1 << 26);
        assert!(
            !unjudged.contains("SLOW") && !unjudged.contains(" OK"),
            "{unjudged}"
        );
    }
}
