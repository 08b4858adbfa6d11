//! Localisation: pairwise sendrecv between ranks of this process (through
//! [`Backend::subset`]) to find the slow rank, host or link behind a short
//! result, and the bandwidth matrix as a text heatmap.
//!
//! Order: ring neighbours first (a slow rank shows in its two ring pairs
//! at once), then every other pair while the world is small; in a big
//! world all pairs cost too much, so after the ring a bisection over
//! halves (sendrecv over a subset is a ring exchange that runs at its
//! slowest member's pace) narrows down one slow rank in log2(n) runs.

use crate::battery::{run_case, CaseOutcome, CaseRequest, Iterations};
use crate::error::CheckError;
use crate::hosts::noise::{log_ratios, mad_sigma, median, NoiseRule, Threshold};
use collbench_core::Bootstrap;
use collbench_core::{size::format_size, Collective, DataType};
use collbench_runner::Backend;
use serde::Serialize;

/// Worlds up to this size get every pair; larger ones ring + bisection.
pub const ALL_PAIRS_MAX: usize = 16;

pub use collbench_core::pairs::PairMatrix;

/// A rank most of whose pairs are slow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Culprit {
    pub rank: usize,
    pub host: String,
    pub slow_pairs: usize,
    pub measured_pairs: usize,
}

/// A slow pair that no culprit rank explains: the link between them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlowLink {
    pub a: usize,
    pub b: usize,
    pub gbps: f64,
}

/// What the pairwise tests found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Localization {
    /// How pairs were chosen (`all pairs, ring neighbours first`, ...).
    pub method: String,
    pub size_bytes: u64,
    /// Pairs below `fraction x reference` are slow.
    pub fraction: f64,
    /// Median over ranks of each rank's fastest pair, GB/s.
    pub reference_gbps: f64,
    /// Set when the pairs spread too much to name anyone: the spread (4 x
    /// their robust sigma, a fraction); then no pair, rank or link is slow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub too_noisy: Option<f64>,
    pub matrix: PairMatrix,
    /// Slow pairs (a, b, GB/s).
    pub slow_pairs: Vec<(usize, usize, f64)>,
    pub culprits: Vec<Culprit>,
    pub slow_links: Vec<SlowLink>,
    /// Bisection result in big worlds: the slow rank it narrowed down to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bisection_rank: Option<usize>,
}

/// Ring neighbours first, then the remaining pairs (a < b in each).
pub fn pair_order(n: usize, all_pairs: bool) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut push = |a: usize, b: usize| {
        let p = (a.min(b), a.max(b));
        if a != b && !out.contains(&p) {
            out.push(p);
        }
    };
    for r in 0..n {
        push(r, (r + 1) % n);
    }
    if all_pairs {
        for a in 0..n {
            for b in a + 1..n {
                push(a, b);
            }
        }
    }
    out
}

/// The reference bandwidth: median over ranks of each rank's fastest
/// pair. A plain median over pairs would sink with the culprit: with 4
/// ranks, half of all pairs involve one slow rank.
pub fn reference_gbps(m: &PairMatrix) -> f64 {
    let mut best: Vec<f64> = m
        .gbps
        .iter()
        .filter_map(|row| row.iter().flatten().copied().reduce(f64::max))
        .collect();
    median(&mut best)
}

/// What a matrix shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Findings {
    pub reference_gbps: f64,
    /// Set when the pairs spread too much to name anyone: the spread
    /// (4 x their robust sigma, a fraction).
    pub too_noisy: Option<f64>,
    pub slow_pairs: Vec<(usize, usize, f64)>,
    pub culprits: Vec<Culprit>,
    pub slow_links: Vec<SlowLink>,
}

/// The noise rule of the host verdict ([`crate::hosts::noise`]) over a
/// rank matrix: the larger robust sigma of the ranks' fastest pairs and of
/// the pairs between ranks that look good at `fraction`. Pure noise (four
/// rank threads on two busy cores) spreads the pairs; a slow rank leaves
/// the others' pairs tight, or stands far below them.
fn pair_threshold(m: &PairMatrix, fraction: f64, reference: f64) -> Threshold {
    let rule = NoiseRule {
        min_effect: 1.0 - fraction,
        ..NoiseRule::default()
    };
    let best: Vec<Option<f64>> = m
        .gbps
        .iter()
        .map(|row| row.iter().flatten().copied().reduce(f64::max))
        .collect();
    let plausible = |r: usize| best[r].is_some_and(|b| b >= fraction * reference);
    let scores = log_ratios(best.iter().flatten().map(|b| b / reference));
    let good_pairs = log_ratios(
        m.pairs()
            .into_iter()
            .filter(|&(a, b, _)| plausible(a) && plausible(b))
            .map(|(_, _, v)| v / reference),
    );
    rule.threshold(mad_sigma(&scores).max(mad_sigma(&good_pairs)))
}

/// Slow pairs, culprit ranks (slow in at least two pairs and in most of
/// their pairs) and the slow links no culprit explains. Slow means below
/// `fraction x reference`, or lower where the pairs' own noise says so.
/// On a very noisy machine only pairs far below it all are slow, and if
/// none is, the matrix is too noisy to judge and names nobody.
pub fn analyse(m: &PairMatrix, fraction: f64, hosts: &[String]) -> Findings {
    let reference = reference_gbps(m);
    let pairs = m.pairs();
    let (cut, noisy) = match pair_threshold(m, fraction, reference) {
        Threshold::Judgeable { cut, .. } => (cut.min(fraction), None),
        Threshold::TooNoisy { cut, spread } => (cut.min(fraction), Some(spread)),
    };
    let slow: Vec<(usize, usize, f64)> = pairs
        .iter()
        .copied()
        .filter(|&(_, _, v)| v < cut * reference)
        .collect();
    let too_noisy = noisy.filter(|_| slow.is_empty());
    let n = m.labels.len();
    // Greedy: name the rank with the largest share of slow pairs, then set
    // its pairs aside before judging the others, so that a healthy rank
    // is not blamed for the slow pair it shares with the culprit.
    let mut culprits: Vec<Culprit> = Vec::new();
    loop {
        let named =
            |p: &(usize, usize, f64)| culprits.iter().any(|c| c.rank == p.0 || c.rank == p.1);
        let best = (0..n)
            .filter(|r| !culprits.iter().any(|c| c.rank == *r))
            .map(|r| {
                let involves = |p: &&(usize, usize, f64)| (p.0 == r || p.1 == r) && !named(p);
                let measured = pairs.iter().filter(involves).count();
                let s = slow.iter().filter(involves).count();
                (r, s, measured)
            })
            .filter(|&(_, s, measured)| s >= 2 && 2 * s > measured)
            .max_by(|a, b| (a.1 * b.2).cmp(&(b.1 * a.2)).then(a.1.cmp(&b.1)));
        let Some((rank, s, measured)) = best else {
            break;
        };
        culprits.push(Culprit {
            rank,
            host: hosts.get(rank).cloned().unwrap_or_default(),
            slow_pairs: s,
            measured_pairs: measured,
        });
    }
    culprits.sort_by_key(|c| c.rank);
    let links = slow
        .iter()
        .filter(|p| !culprits.iter().any(|c| c.rank == p.0 || c.rank == p.1))
        .map(|&(a, b, gbps)| SlowLink { a, b, gbps })
        .collect();
    Findings {
        reference_gbps: reference,
        too_noisy,
        slow_pairs: slow,
        culprits,
        slow_links: links,
    }
}

/// The one measurement the pairwise tests repeat: sendrecv of `size_bytes`
/// on a subset of the ranks.
struct Sendrecv<'a> {
    backend: &'a dyn Backend,
    control: &'a dyn Bootstrap,
    size_bytes: u64,
    iters: Iterations,
}

impl Sendrecv<'_> {
    /// Best-of-placements busbw in GB/s of sendrecv on `ranks`.
    fn busbw(&self, ranks: &[usize]) -> Result<f64, CheckError> {
        let mut sub = self
            .backend
            .subset(ranks)
            .map_err(|error| CheckError::Subset {
                ranks: ranks.to_vec(),
                error,
            })?;
        let req = CaseRequest {
            collective: Collective::SendRecv,
            dtype: DataType::Float,
            size_bytes: self.size_bytes,
        };
        // One process, rank threads of its own: nothing to watch for.
        let watchdog = collbench_runner::Watchdog::default();
        match run_case(sub.as_mut(), self.control, req, self.iters, &watchdog)? {
            Some(CaseOutcome::Measured(m)) if m.wrong > 0 => Err(CheckError::PairWrong {
                ranks: ranks.to_vec(),
                wrong: m.wrong,
            }),
            Some(CaseOutcome::Measured(m)) => Ok(m.best_busbw_gbps()),
            Some(CaseOutcome::Skipped(why)) => Err(CheckError::PairSkipped {
                ranks: ranks.to_vec(),
                why,
            }),
            None => Err(CheckError::PairsNotLocal),
        }
    }
}

/// Runs the pairwise tests over this process's ranks and analyses them.
/// `progress` hears one line per finished test.
pub fn localize(
    backend: &dyn Backend,
    control: &dyn Bootstrap,
    size_bytes: u64,
    iters: Iterations,
    fraction: f64,
    progress: &mut dyn FnMut(&str),
) -> Result<Localization, CheckError> {
    let sendrecv = Sendrecv {
        backend,
        control,
        size_bytes,
        iters,
    };
    let n = backend.world_size();
    let hosts = rank_hosts(backend, n);
    let all_pairs = n <= ALL_PAIRS_MAX;
    let mut matrix = measure_pairs(&sendrecv, n, all_pairs, progress)?;
    repeat_slow_pairs(&sendrecv, &mut matrix, fraction, progress)?;
    let bisection_rank = if all_pairs {
        None
    } else {
        bisect(&sendrecv, n, fraction, progress)?
    };
    let Findings {
        reference_gbps,
        too_noisy,
        slow_pairs,
        culprits,
        slow_links,
    } = analyse(&matrix, fraction, &hosts);
    Ok(Localization {
        method: if all_pairs {
            "every pair, ring neighbours first".into()
        } else {
            format!("ring neighbours, then bisection ({n} ranks > {ALL_PAIRS_MAX})")
        },
        size_bytes,
        fraction,
        reference_gbps,
        too_noisy,
        matrix,
        slow_pairs,
        culprits,
        slow_links,
        bisection_rank,
    })
}

/// The host of each of the `n` ranks, as the backend names it (empty
/// where it does not).
fn rank_hosts(backend: &dyn Backend, n: usize) -> Vec<String> {
    let devices = backend.info().devices;
    (0..n)
        .map(|r| {
            devices
                .iter()
                .find(|d| d.rank as usize == r)
                .map(|d| d.host.clone())
                .unwrap_or_default()
        })
        .collect()
}

/// The first test of each pair of the `n` ranks, ring neighbours first
/// (then every other pair when `all_pairs`), as a matrix.
fn measure_pairs(
    sendrecv: &Sendrecv,
    n: usize,
    all_pairs: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<PairMatrix, CheckError> {
    let labels = (0..n).map(|r| format!("r{r}")).collect();
    let mut matrix = PairMatrix::new(labels);
    for (a, b) in pair_order(n, all_pairs) {
        let v = sendrecv.busbw(&[a, b])?;
        progress(&format!("sendrecv r{a} <-> r{b}: {v:.2} GB/s"));
        matrix.set(a, b, v);
    }
    Ok(matrix)
}

/// Measures flagged pairs again (up to three times, until they are no
/// longer slow) and keeps the best figure: a slow rank or link is slow
/// every time, a busy neighbour on a shared machine only sometimes.
/// Flagged at `fraction` whatever the noise: the repeats are what tell a
/// slow rank from a noisy machine.
fn repeat_slow_pairs(
    sendrecv: &Sendrecv,
    matrix: &mut PairMatrix,
    fraction: f64,
    progress: &mut dyn FnMut(&str),
) -> Result<(), CheckError> {
    let reference = reference_gbps(matrix);
    let flagged = matrix
        .pairs()
        .into_iter()
        .filter(|p| p.2 < fraction * reference);
    for (a, b, mut best) in flagged {
        for _ in 0..3 {
            if best >= fraction * reference {
                break;
            }
            let again = sendrecv.busbw(&[a, b])?;
            if again > best {
                progress(&format!(
                    "sendrecv r{a} <-> r{b} again: {again:.2} GB/s (reference {reference:.2})"
                ));
                best = again;
                matrix.set(a, b, again);
            }
        }
    }
    Ok(())
}

/// Halves the rank set towards the slower half while one half is clearly
/// slower than the other; returns the single rank it ends on, if any.
fn bisect(
    sendrecv: &Sendrecv,
    n: usize,
    fraction: f64,
    progress: &mut dyn FnMut(&str),
) -> Result<Option<usize>, CheckError> {
    let mut set: Vec<usize> = (0..n).collect();
    while set.len() >= 4 {
        let (lo, hi) = set.split_at(set.len() / 2);
        let (a, b) = (sendrecv.busbw(lo)?, sendrecv.busbw(hi)?);
        progress(&format!(
            "bisection: ranks {}..={} {a:.2} GB/s, ranks {}..={} {b:.2} GB/s",
            lo[0],
            lo[lo.len() - 1],
            hi[0],
            hi[hi.len() - 1]
        ));
        set = if a < fraction * b {
            lo.to_vec()
        } else if b < fraction * a {
            hi.to_vec()
        } else {
            return Ok(None);
        };
    }
    // Two or three ranks left: the one in every slow pair.
    Ok(set.first().copied().filter(|_| set.len() == 1))
}

/// Shade of a cell relative to the reference.
fn shade(v: f64, reference: f64) -> char {
    let r = if reference > 0.0 { v / reference } else { 1.0 };
    match r {
        r if r >= 0.9 => '█',
        r if r >= 0.75 => '▓',
        r if r >= 0.5 => '▒',
        _ => '░',
    }
}

/// The matrix as text: one row per rank, a shade and GB/s per cell (shade
/// only beyond 16 ranks, to stay within a terminal).
pub fn heatmap_text(loc: &Localization) -> String {
    let m = &loc.matrix;
    let n = m.labels.len();
    let compact = n > 16;
    let w = m.labels.iter().map(|l| l.len()).max().unwrap_or(2).max(3);
    let cell = if compact { 2 } else { 10 };
    let mut out = format!(
        "pairwise sendrecv busbw (GB/s) at {}, reference {:.2} GB/s: █ >= 90%  ▓ >= 75%  ▒ >= 50%  ░ < 50%  . not measured\n",
        format_size(loc.size_bytes),
        loc.reference_gbps
    );
    out += &format!("{:w$}", "");
    for l in &m.labels {
        if compact {
            out += &format!("{:>cell$}", l.chars().last().unwrap_or(' '));
        } else {
            out += &format!("{l:>cell$}");
        }
    }
    out += "\n";
    for a in 0..n {
        out += &format!("{:<w$}", m.labels[a]);
        for b in 0..n {
            let text = match (a == b, m.gbps[a][b]) {
                (true, _) => "-".to_string(),
                (false, None) => ".".to_string(),
                (false, Some(v)) if compact => shade(v, loc.reference_gbps).to_string(),
                (false, Some(v)) => format!("{} {v:.2}", shade(v, loc.reference_gbps)),
            };
            out += &format!("{text:>cell$}");
        }
        out += "\n";
    }
    out
}

/// The findings in words, one line each.
pub fn findings(loc: &Localization) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(spread) = loc.too_noisy {
        out.push(format!(
            "pairs spread by +-{:.0}% (4 x their robust sigma, after repeats): too noisy to name a rank or link; run again on a quiet machine",
            spread * 100.0
        ));
    }
    for c in &loc.culprits {
        out.push(format!(
            "slow rank: r{} on host {} ({} of its {} pairs below {:.0}% of {:.2} GB/s)",
            c.rank,
            if c.host.is_empty() { "?" } else { &c.host },
            c.slow_pairs,
            c.measured_pairs,
            loc.fraction * 100.0,
            loc.reference_gbps
        ));
    }
    for l in &loc.slow_links {
        out.push(format!(
            "slow link: r{} <-> r{} at {:.2} GB/s (below {:.0}% of {:.2} GB/s)",
            l.a,
            l.b,
            l.gbps,
            loc.fraction * 100.0,
            loc.reference_gbps
        ));
    }
    if let Some(r) = loc.bisection_rank {
        out.push(format!("bisection narrows the slowness down to r{r}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(n: usize, v: impl Fn(usize, usize) -> f64) -> PairMatrix {
        let mut m = PairMatrix::new((0..n).map(|r| format!("r{r}")).collect());
        for (a, b) in pair_order(n, true) {
            m.set(a, b, v(a, b));
        }
        m
    }

    #[test]
    fn ring_neighbours_come_first() {
        let p = pair_order(4, true);
        assert_eq!(&p[..4], &[(0, 1), (1, 2), (2, 3), (0, 3)]);
        assert_eq!(p.len(), 6);
        assert_eq!(pair_order(2, true), vec![(0, 1)]);
        assert_eq!(pair_order(20, false).len(), 20);
    }

    #[test]
    fn names_the_rank_common_to_slow_pairs() {
        let hosts = vec!["h".to_string(); 4];
        let m = matrix(4, |a, b| if a == 2 || b == 2 { 1.0 } else { 30.0 });
        let f = analyse(&m, 0.8, &hosts);
        assert_eq!(f.reference_gbps, 30.0);
        assert_eq!(f.slow_pairs.len(), 3);
        assert_eq!(f.culprits.len(), 1);
        assert_eq!(f.culprits[0].rank, 2);
        assert!(f.slow_links.is_empty());
    }

    #[test]
    fn three_ranks_one_slow_is_still_found() {
        let m = matrix(3, |a, b| if a == 0 || b == 0 { 2.0 } else { 20.0 });
        let f = analyse(&m, 0.8, &[]);
        assert_eq!(f.culprits.iter().map(|c| c.rank).collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn a_noisy_pair_next_to_the_culprit_does_not_blame_its_neighbour() {
        // r2 is slow; the r0-r1 pair also read low once (a busy machine).
        let m = matrix(4, |a, b| match (a, b) {
            _ if a == 2 || b == 2 => 1.0,
            (0, 1) => 10.0,
            _ => 30.0,
        });
        let f = analyse(&m, 0.8, &[]);
        assert_eq!(f.culprits.iter().map(|c| c.rank).collect::<Vec<_>>(), [2]);
        assert_eq!((f.slow_links[0].a, f.slow_links[0].b), (0, 1));
    }

    #[test]
    fn a_single_slow_pair_is_a_link() {
        let m = matrix(4, |a, b| if (a, b) == (1, 3) { 5.0 } else { 30.0 });
        let f = analyse(&m, 0.8, &[]);
        assert!(f.culprits.is_empty());
        assert_eq!((f.slow_links[0].a, f.slow_links[0].b), (1, 3));
    }

    #[test]
    fn uniform_matrix_has_no_findings() {
        let m = matrix(4, |a, b| 30.0 + (a + b) as f64 * 0.1);
        let f = analyse(&m, 0.8, &[]);
        assert!(f.slow_pairs.is_empty() && f.culprits.is_empty() && f.slow_links.is_empty());
    }

    /// Four rank threads on two busy cores (as measured there: most pairs
    /// 4.1-4.8 GB/s, some much lower even after repeats): no rank or link
    /// stands out from that noise, so none is named.
    #[test]
    fn noisy_machine_names_no_rank_or_link() {
        let m = matrix(4, |a, b| match (a, b) {
            (0, 1) => 2.9,
            (1, 2) => 3.1,
            (0, 2) => 3.0,
            (1, 3) => 4.7,
            (0, 3) => 4.1,
            _ => 4.6,
        });
        let f = analyse(&m, 0.8, &[]);
        assert!(f.culprits.is_empty() && f.slow_links.is_empty(), "{f:?}");
        assert!(f.too_noisy.is_some(), "{f:?}");
        // The same slow rank on a quiet machine is named.
        let quiet = matrix(4, |a, b| if a == 1 || b == 1 { 2.9 } else { 4.6 });
        let f = analyse(&quiet, 0.8, &[]);
        assert_eq!(f.culprits.iter().map(|c| c.rank).collect::<Vec<_>>(), [1]);
        assert_eq!(f.too_noisy, None);
    }

    #[test]
    fn heatmap_shades_cells() {
        let m = matrix(3, |a, b| if a == 0 || b == 0 { 2.0 } else { 20.0 });
        let f = analyse(&m, 0.8, &[]);
        let loc = Localization {
            method: "t".into(),
            size_bytes: 4 << 20,
            fraction: 0.8,
            reference_gbps: f.reference_gbps,
            too_noisy: f.too_noisy,
            matrix: m,
            slow_pairs: f.slow_pairs,
            culprits: f.culprits,
            slow_links: f.slow_links,
            bisection_rank: None,
        };
        let text = heatmap_text(&loc);
        let rows: Vec<&str> = text.lines().collect();
        assert!(rows[0].contains("at 4M"), "{text}");
        assert!(
            rows[2].starts_with("r0") && rows[2].contains("░ 2.00"),
            "{text}"
        );
        assert!(rows[3].contains("█ 20.00"), "{text}");
        assert!(findings(&loc)[0].starts_with("slow rank: r0"));
    }
}
