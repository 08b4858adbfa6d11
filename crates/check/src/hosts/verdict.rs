//! The host verdict: which host (or host-to-host link) is slow, judged
//! from the pair figures alone; a baseline, when given, is judged too.
//!
//! A pair runs at its slower host's pace, so a host is only as slow as its
//! *fastest* pair: its score is that pair over the job median (the median
//! over hosts of each host's fastest pair). A good host that met the bad
//! one still has fast pairs with everyone else and is not blamed. A host
//! whose score is below the noise rule's cut is a suspect. It is named
//! once two or more good hosts saw it slow, one of them in a confirmation
//! round (a test taken after the suspicion: noise that made it look slow
//! once rarely does so again). A slow pair between two good hosts is a
//! suspect link, named once it was slow in [`JudgeConfig::link_tests`]
//! tests (one-off outliers are common).

use super::matrix::{HostMatrix, HostScore, PairCell, PairResult};
use super::noise::{log_ratios, median, noise_bound, NoiseRule, Threshold};
use super::schedule::main_rounds;
use super::types::{Finding, HostVerdict, JudgeConfig, SlowHostEvidence};
use crate::verdict::Status;
use std::collections::BTreeMap;

/// Judges the pair figures of a job (see the module doc).
pub fn judge(results: &[PairResult], cfg: &JudgeConfig) -> HostVerdict {
    let matrix = HostMatrix::from_results(results, cfg.hosts);
    let reference = matrix.reference_gbps;
    let mut findings = Vec::new();
    if let Some(expected) = cfg.expected_gbps.filter(|e| *e > 0.0) {
        findings.push(Finding::BelowBaseline {
            median_gbps: reference,
            expected_gbps: expected,
            ratio: reference / expected,
        });
    }
    let measured_hosts = matrix.hosts.iter().filter(|h| h.score.is_some()).count();
    let (threshold, sigma) = if measured_hosts < 3 {
        if cfg.expected_gbps.is_none() {
            findings.push(Finding::TooFewHosts {
                hosts: measured_hosts,
            });
        }
        (None, 0.0)
    } else {
        let sigma = noise_sigma(results, &matrix, cfg.rule);
        let t = cfg.rule.threshold(sigma);
        match t {
            Threshold::TooNoisy { spread, cut } => {
                findings.push(Finding::Unjudgeable { spread, cut });
                // A host far below the noise still stands out from it
                // (a starved host at 0.1x in a job spread by +-60%); it
                // is named only once confirmed, as in a quiet job.
                findings.extend(slow_hosts(&matrix, cut, cfg));
            }
            Threshold::Judgeable { cut, .. } => {
                findings.extend(slow_hosts(&matrix, cut, cfg));
                findings.extend(slow_links(&matrix, cut, cfg));
            }
        }
        (Some(t), sigma)
    };
    let status = findings
        .iter()
        .map(|f| f.status(cfg.fractions))
        .max()
        .unwrap_or(Status::Pass)
        .max(Status::Pass);
    HostVerdict {
        status,
        threshold,
        noise_sigma: sigma,
        findings,
        matrix,
    }
}

/// Noise, the larger of two robust sigmas (each an upper bound, see
/// [`noise_bound`]): of the hosts' scores, and of single tests between
/// hosts that look good at the minimum effect (the slow host's pairs
/// would pass for noise in a small world; single tests, since the best of
/// a few repeats hides how much one test wanders).
fn noise_sigma(results: &[PairResult], m: &HostMatrix, rule: NoiseRule) -> f64 {
    let scores: Vec<f64> = m.hosts.iter().filter_map(|h| h.score).collect();
    let plausible = |h: usize| {
        m.hosts
            .get(h)
            .and_then(|h| h.score)
            .is_some_and(|s| s >= 1.0 - rule.min_effect)
    };
    let tests = results
        .iter()
        .filter(|r| r.a != r.b && plausible(r.a) && plausible(r.b))
        .map(|r| r.busbw_gbps / m.reference_gbps);
    let tests = log_ratios(tests);
    let from_tests = noise_bound(&tests);
    if scores.len() < SCORES_FOR_NOISE && tests.len() >= TESTS_FOR_NOISE {
        return from_tests;
    }
    noise_bound(&log_ratios(scores)).max(from_tests)
}

/// Fewest single tests between plausible hosts that may say the noise of
/// a small world alone: with fewer (a slow host and a noisy one leave one
/// or two), the scores must count, or a host 22% slow in a noisy job reads
/// as slow against a noise of zero (seen on CI's CPU hook).
const TESTS_FOR_NOISE: usize = 6;

/// Fewest hosts whose scores count towards the noise. A score is its
/// host's fastest of a few tests, so with four hosts one fast test splits
/// the scores in two (0.88-1.09 on quiet emulated hosts whose single tests
/// spread 7%), and their MAD, widened x1.6 for four values, read as +-58%:
/// a quiet job warned. The single tests (six or more) say the noise there.
const SCORES_FOR_NOISE: usize = 6;

fn slow_hosts(m: &HostMatrix, cut: f64, cfg: &JudgeConfig) -> Vec<Finding> {
    let good = |h: usize| m.hosts[h].score.is_some_and(|s| s >= cut);
    let mut by_host: BTreeMap<usize, Vec<&PairCell>> = BTreeMap::new();
    for p in &m.pairs {
        by_host.entry(p.a).or_default().push(p);
        by_host.entry(p.b).or_default().push(p);
    }
    let mut out = Vec::new();
    for HostScore { host, score, .. } in &m.hosts {
        let (host, Some(ratio)) = (*host, *score) else {
            continue;
        };
        if ratio >= cut {
            continue;
        }
        let pairs = by_host.get(&host).map(Vec::as_slice).unwrap_or_default();
        let partner = |p: &PairCell| if p.a == host { p.b } else { p.a };
        // Every pair is below the cut (the fastest is); which were with
        // good hosts, and which of those in a confirmation round?
        let with_good: Vec<&&PairCell> = pairs.iter().filter(|p| good(partner(p))).collect();
        let first_confirmation = cfg.main_rounds.unwrap_or_else(|| main_rounds(cfg.hosts));
        let confirmed_with: Vec<usize> = with_good
            .iter()
            .filter(|p| p.last_round >= first_confirmation)
            .map(|p| partner(p))
            .collect();
        let (pairs_below, pairs_total) =
            (pairs.iter().filter(|p| p.ratio < cut).count(), pairs.len());
        let confirmed = with_good.len() >= 2 && !confirmed_with.is_empty();
        let evidence = SlowHostEvidence {
            host,
            ratio,
            pairs_below,
            pairs_total,
            confirmed_with,
        };
        out.push(if confirmed {
            Finding::SlowHost(evidence)
        } else {
            Finding::SuspectHost(evidence)
        });
    }
    out
}

/// Slow pairs between good hosts. Good pairs sit a little under the job
/// median (which is a median of each host's fastest pair), so the cut is
/// taken from the typical good pair.
fn slow_links(m: &HostMatrix, cut: f64, cfg: &JudgeConfig) -> Vec<Finding> {
    let good = |h: usize| m.hosts[h].score.is_some_and(|s| s >= cut);
    let mut typical: Vec<f64> = m
        .pairs
        .iter()
        .filter(|p| good(p.a) && good(p.b))
        .map(|p| p.ratio)
        .collect();
    let link_cut = median(&mut typical) * cut;
    m.pairs
        .iter()
        .filter(|p| good(p.a) && good(p.b) && p.ratio < link_cut)
        .map(|p| {
            let (a, b, ratio, tests) = (p.a, p.b, p.ratio, p.tests);
            if tests >= cfg.link_tests {
                Finding::SlowLink { a, b, ratio, tests }
            } else {
                Finding::SuspectLink { a, b, ratio, tests }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::matrix::fixtures::job;
    use super::super::matrix::HostInfo;
    use super::super::types::finding_lines;
    use super::*;

    /// Every pair of `h` hosts measured `times` times at `v(a, b)`.
    fn all_pairs(h: usize, times: usize, v: impl Fn(usize, usize) -> f64) -> Vec<PairResult> {
        let mut out = Vec::new();
        for round in 0..times {
            for a in 0..h {
                for b in a + 1..h {
                    let busbw_gbps = v(a, b) * (1.0 + 0.01 * ((a * 7 + b * 3 + round) % 5) as f64);
                    out.push(PairResult {
                        a,
                        b,
                        round,
                        busbw_gbps,
                    });
                }
            }
        }
        out
    }

    #[test]
    fn quiet_job_passes_and_names_nobody() {
        let v = judge(&all_pairs(8, 1, |_, _| 40.0), &JudgeConfig::new(8));
        assert_eq!(v.status, Status::Pass);
        assert!(v.findings.is_empty(), "{:?}", v.findings);
    }

    /// The verdict suspects `host` alone, not yet confirmed: a warning.
    fn assert_only_suspect(v: &HostVerdict, host: usize) {
        assert!(
            matches!(&v.findings[..], [Finding::SuspectHost(e)] if e.host == host),
            "{:?}",
            v.findings
        );
        assert_eq!(v.status, Status::Warn);
    }

    /// A test of pair (a, b) in a confirmation round.
    fn confirmation(a: usize, b: usize, busbw_gbps: f64) -> PairResult {
        PairResult {
            a,
            b,
            round: 99,
            busbw_gbps,
        }
    }

    #[test]
    fn slow_host_is_named_once_confirmed_and_its_partners_are_not() {
        let slow = |a: usize, b: usize| if a == 3 || b == 3 { 8.0 } else { 40.0 };
        let mut results = all_pairs(6, 1, slow);
        let suspect = judge(&results, &JudgeConfig::new(6));
        assert_only_suspect(&suspect, 3);
        results.push(confirmation(0, 3, 8.1));
        let v = judge(&results, &JudgeConfig::new(6));
        let [Finding::SlowHost(SlowHostEvidence {
            host: 3,
            ratio,
            pairs_below: 5,
            pairs_total: 5,
            confirmed_with,
        })] = v.findings.as_slice()
        else {
            panic!("{:?}", v.findings)
        };
        assert!((0.15..0.25).contains(ratio), "{ratio}");
        assert_eq!(confirmed_with, &[0]);
        assert_eq!(v.status, Status::Fail);
        assert!(!v.good_hosts().contains(&3));
    }

    #[test]
    fn a_suspect_that_is_fast_when_tested_again_is_not_named() {
        let slow = |a: usize, b: usize| if a == 3 || b == 3 { 8.0 } else { 40.0 };
        let mut results = all_pairs(6, 1, slow);
        results.push(confirmation(0, 3, 40.5));
        let v = judge(&results, &JudgeConfig::new(6));
        // Host 3 is fast with host 0: its other pairs are suspect links.
        assert!(
            v.findings.iter().all(|f| f.host().is_none()),
            "{:?}",
            v.findings
        );
        assert!(matches!(
            v.findings[0],
            Finding::SuspectLink { a: 1, b: 3, .. }
        ));
    }

    #[test]
    fn slow_link_needs_repeated_tests() {
        let link = |a: usize, b: usize| if (a, b) == (1, 4) { 15.0 } else { 40.0 };
        let once = judge(&all_pairs(6, 1, link), &JudgeConfig::new(6));
        assert_eq!(
            only_link(&once),
            Some(("suspect", 1, 4, 1)),
            "{:?}",
            once.findings
        );
        assert!(once.has_suspects());
        let thrice = judge(&all_pairs(6, 3, link), &JudgeConfig::new(6));
        assert_eq!(
            only_link(&thrice),
            Some(("slow", 1, 4, 3)),
            "{:?}",
            thrice.findings
        );
    }

    /// The verdict's one finding when it is about a link: whether slow or
    /// suspect, its hosts, and how many tests said so.
    fn only_link(v: &HostVerdict) -> Option<(&'static str, usize, usize, usize)> {
        match v.findings[..] {
            [Finding::SlowLink { a, b, tests, .. }] => Some(("slow", a, b, tests)),
            [Finding::SuspectLink { a, b, tests, .. }] => Some(("suspect", a, b, tests)),
            _ => None,
        }
    }

    #[test]
    fn host_seen_slow_by_one_good_host_is_only_a_suspect() {
        // Hosts 0-3; only pairs (0,1), (2,3) and (0,2) measured: host 1
        // met host 0 only.
        let r = |a, b, v| PairResult {
            a,
            b,
            round: 0,
            busbw_gbps: v,
        };
        let results = [r(0, 1, 10.0), r(2, 3, 40.0), r(0, 2, 40.0)];
        let v = judge(&results, &JudgeConfig::new(4));
        assert_only_suspect(&v, 1);
    }

    #[test]
    fn spread_figures_are_unjudgeable_and_name_nobody() {
        let wild = |a: usize, b: usize| [40.0, 12.0, 33.0, 20.0, 6.0, 38.0][(a * 5 + b) % 6];
        let v = judge(&all_pairs(5, 1, wild), &JudgeConfig::new(5));
        assert!(
            matches!(v.findings[..], [Finding::Unjudgeable { .. }]),
            "{:?}",
            v.findings
        );
        assert_eq!(v.status, Status::Warn);
    }

    /// CI's CPU hook, four processes on two cores: host 2 slowed by the
    /// hook, host 1 slowed by the machine (0.59-0.78x). Two plausible hosts
    /// leave one test between them, too few to say the noise: the scores
    /// count, and only host 2 is named.
    #[test]
    fn a_noisy_host_beside_a_slow_one_is_not_named() {
        let t = |a, b, round, r: f64| PairResult {
            a,
            b,
            round,
            busbw_gbps: 7.38 * r,
        };
        let results = [
            t(0, 3, 0, 1.22),
            t(1, 2, 0, 0.03),
            t(0, 1, 1, 0.59),
            t(2, 3, 1, 0.03),
            t(0, 2, 2, 0.03),
            t(1, 3, 2, 0.78),
            t(1, 3, 3, 0.70),
            t(0, 2, 3, 0.03),
            t(0, 1, 4, 0.55),
            t(2, 3, 4, 0.03),
        ];
        let v = judge(&results, &JudgeConfig::new(4));
        let named: Vec<usize> = v.findings.iter().filter_map(Finding::host).collect();
        assert_eq!(named, [2], "{:?}", v.findings);
    }

    #[test]
    fn two_hosts_need_a_baseline() {
        let pair = all_pairs(2, 1, |_, _| 10.0);
        let v = judge(&pair, &JudgeConfig::new(2));
        assert_eq!(v.findings, [Finding::TooFewHosts { hosts: 2 }]);
        assert_eq!(v.status, Status::Pass);
        let cfg = JudgeConfig {
            expected_gbps: Some(40.0),
            ..JudgeConfig::new(2)
        };
        let v = judge(&pair, &cfg);
        assert!(matches!(v.findings[..], [Finding::BelowBaseline { .. }]));
        assert_eq!(v.status, Status::Fail);
    }

    #[test]
    fn baseline_catches_a_job_where_every_host_is_slow() {
        let cfg = JudgeConfig {
            expected_gbps: Some(40.0),
            ..JudgeConfig::new(6)
        };
        let slow_everywhere = judge(&all_pairs(6, 1, |_, _| 30.0), &cfg);
        assert_eq!(slow_everywhere.status, Status::Warn);
        assert!(judge(&all_pairs(6, 1, |_, _| 39.0), &cfg).status == Status::Pass);
    }

    /// Hosts n0, n1, ... of eight ranks each.
    fn hosts(n: usize) -> Vec<HostInfo> {
        (0..n)
            .map(|h| HostInfo {
                name: format!("n{h}"),
                ranks: 8 * h..8 * h + 8,
            })
            .collect()
    }

    #[test]
    fn slow_host_line_names_host_ranks_and_partners() {
        let mut results = job(4, 3);
        let round = 3; // the first confirmation round of 4 hosts
        results.push(PairResult {
            a: 1,
            b: 3,
            round,
            busbw_gbps: 8.3,
        });
        let v = judge(&results, &JudgeConfig::new(4));
        let lines = finding_lines(&v, &hosts(4));
        assert_eq!(
            lines,
            ["host n3 (ranks 24-31): 0.21x the job median in 3 of 3 pairs (confirmed with n1)"]
        );
    }

    #[test]
    fn grid_for_small_jobs_list_for_large() {
        let v = judge(&job(3, 0), &JudgeConfig::new(3));
        let text = v.matrix.text(&hosts(3));
        let rows: Vec<&str> = text.lines().collect();
        assert!(rows[0].contains("3 measured, job median 40.00"), "{text}");
        assert_eq!(
            rows[2].split_whitespace().collect::<Vec<_>>(),
            ["n0", "-", "0.21", "0.21"]
        );
        assert_eq!(
            rows[3].split_whitespace().collect::<Vec<_>>(),
            ["n1", "0.21", "-", "1.00"]
        );
        let big = judge(&job(40, 7), &JudgeConfig::new(40));
        let text = big.matrix.text(&hosts(40));
        assert!(
            text.lines().nth(2).unwrap().trim_start().starts_with("n7 "),
            "{text}"
        );
        let json = serde_json::to_value(&big).unwrap();
        assert_eq!(json["findings"][0]["kind"], "suspect_host");
        assert_eq!(
            json["matrix"]["pairs"].as_array().unwrap().len(),
            40 * 39 / 2
        );
    }
}
