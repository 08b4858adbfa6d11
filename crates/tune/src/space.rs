//! Where the search looks: size bands from the `-b/-e/-f` sweep and the
//! candidate settings per op, split into allowed and forbidden (too many
//! channels for `--max-channels`).

use crate::setting::{Algorithm, CtaPolicy, Protocol, Registration, Setting};
use collbench_core::Collective;
use serde::{Deserialize, Serialize};

/// A size band of one op: the search measures at `probe_bytes` and the
/// result stands for every size in `min_bytes..=max_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Band {
    pub op: Collective,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub probe_bytes: u64,
}

/// The bands for one op from the sweep's sizes (sorted, deduplicated):
/// one band per size, with edges near the geometric midpoints between
/// neighbouring sizes, so each probe sits in the middle of its band (in log
/// size, the axis NCCL's choices change along). Edges are rounded to a
/// power of two or 1.5 times one (with `-f 4` they are exact powers of
/// two), so they read well in tables and CSV files. The first band starts
/// at the smallest size and the last ends at the largest: `tune` claims
/// nothing about sizes it did not sweep.
pub fn bands(op: Collective, sizes: &[u64]) -> Vec<Band> {
    let mut s: Vec<u64> = sizes.to_vec();
    s.sort_unstable();
    s.dedup();
    let edge = |a: u64, b: u64| nice(((a as f64) * (b as f64)).sqrt());
    (0..s.len())
        .map(|i| Band {
            op,
            min_bytes: if i == 0 {
                s[0]
            } else {
                edge(s[i - 1], s[i]).clamp(s[i - 1] + 1, s[i])
            },
            max_bytes: if i + 1 == s.len() {
                s[i]
            } else {
                edge(s[i], s[i + 1]).clamp(s[i] + 1, s[i + 1]) - 1
            },
            probe_bytes: s[i],
        })
        .collect()
}

/// The value of the form 2^k or 3 * 2^(k-1) nearest to `x` in log scale.
fn nice(x: f64) -> u64 {
    if x < 2.0 {
        return x.round().max(1.0) as u64;
    }
    let k = x.log2().floor() as i32;
    let lo = 2f64.powi(k);
    [lo, 1.5 * lo, 2.0 * lo]
        .into_iter()
        .min_by(|a, b| (a.ln() - x.ln()).abs().total_cmp(&(b.ln() - x.ln()).abs()))
        .unwrap_or(lo) as u64
}

/// Which candidates to try.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateSpace {
    /// Fixed channel counts to try (`minCTAs = maxCTAs`).
    pub channels: Vec<u32>,
    /// Try each algorithm/protocol pair NCCL has for the op.
    pub algo_proto: bool,
    /// Try `-R 1` and `-R 2`.
    pub registration: bool,
    /// Try the non-default CTA policies.
    pub cta_policy: bool,
    /// More settings, tried as given (e.g. a default spelled out).
    pub extra: Vec<Setting>,
    /// Settings the user asked for by name (`--env`), screened before all
    /// others: when a band's budget is tight, the first candidates are the
    /// ones it measures, and a user's own must not be the one left out.
    #[serde(default)]
    pub asked: Vec<Setting>,
}

impl Default for CandidateSpace {
    fn default() -> CandidateSpace {
        CandidateSpace {
            channels: vec![2, 4, 8, 16, 32, 64],
            algo_proto: true,
            registration: true,
            cta_policy: true,
            extra: buffsize_candidates(),
            asked: Vec::new(),
        }
    }
}

impl CandidateSpace {
    /// A space of just these settings (no channel, algorithm/protocol,
    /// registration or CTA-policy candidates).
    pub fn only(settings: Vec<Setting>) -> CandidateSpace {
        CandidateSpace {
            channels: Vec::new(),
            algo_proto: false,
            registration: false,
            cta_policy: false,
            extra: settings,
            asked: Vec::new(),
        }
    }
}

/// NCCL's default buffer size (`NCCL_BUFFSIZE`, 4 MiB in 2.28).
pub const NCCL_DEFAULT_BUFFSIZE: u64 = 4 << 20;

/// The environment-only candidates of the default space, measured in
/// child processes (docs/tune.md, section 3): the buffer size doubled, and
/// NCCL's default spelled out, which must come out as no gain (the issue's
/// check that a setting identical to the default is not called a gain).
pub fn buffsize_candidates() -> Vec<Setting> {
    [2 * NCCL_DEFAULT_BUFFSIZE, NCCL_DEFAULT_BUFFSIZE]
        .into_iter()
        .map(|b| Setting {
            env: vec![("NCCL_BUFFSIZE".to_string(), b.to_string())],
            ..Setting::default()
        })
        .collect()
}

/// The algorithm/protocol pairs NCCL implements for an op (from NCCL's
/// kernels: NVLS, NVLS tree, CollNet and PAT only with Simple; broadcast
/// and reduce only as rings). Pairs a machine lacks (NVLS without NVLink
/// SHARP, CollNet without a CollNet network) come back from the measurer
/// as unsupported.
pub fn algo_protos(op: Collective) -> Vec<(Algorithm, Protocol)> {
    let all_protos = |a: Algorithm| Protocol::ALL.into_iter().map(move |p| (a, p));
    let simple = |a: Algorithm| std::iter::once((a, Protocol::Simple));
    match op {
        Collective::AllReduce => all_protos(Algorithm::Ring)
            .chain(all_protos(Algorithm::Tree))
            .chain(simple(Algorithm::Nvls))
            .chain(simple(Algorithm::NvlsTree))
            .chain(simple(Algorithm::CollnetDirect))
            .chain(simple(Algorithm::CollnetChain))
            .collect(),
        Collective::AllGather | Collective::ReduceScatter => all_protos(Algorithm::Ring)
            .chain(simple(Algorithm::Nvls))
            .chain(simple(Algorithm::Pat))
            .chain(simple(Algorithm::CollnetDirect))
            .collect(),
        Collective::Broadcast | Collective::Reduce => all_protos(Algorithm::Ring).collect(),
        // NCCL's tuner interface covers only the five collectives above.
        _ => Vec::new(),
    }
}

/// Candidates for one op in screening order (the user's own first), without
/// the default and without repeats (the first kept): `(allowed, forbidden)`, where forbidden ones fix more channels than
/// `max_channels` and are never measured.
pub fn candidates(
    space: &CandidateSpace,
    op: Collective,
    max_channels: Option<u32>,
) -> (Vec<Setting>, Vec<Setting>) {
    let mut all: Vec<Setting> = space.asked.clone();
    for &n in &space.channels {
        all.push(Setting {
            channels: Some(n),
            ..Setting::default()
        });
    }
    if space.algo_proto {
        for (a, p) in algo_protos(op) {
            all.push(Setting {
                algorithm: Some(a),
                protocol: Some(p),
                ..Setting::default()
            });
        }
    }
    if space.registration {
        for r in [Registration::Local, Registration::Symmetric] {
            all.push(Setting {
                registration: r,
                ..Setting::default()
            });
        }
    }
    if space.cta_policy {
        for c in [CtaPolicy::Efficiency, CtaPolicy::Zero] {
            all.push(Setting {
                cta_policy: c,
                ..Setting::default()
            });
        }
    }
    all.extend(space.extra.iter().cloned());
    let mut seen = std::collections::HashSet::new();
    all.retain(|s| !s.is_default() && seen.insert(s.clone()));
    all.into_iter()
        .partition(|s| match (s.channels, max_channels) {
            (Some(n), Some(max)) => n <= max,
            _ => true,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Each band starts right after the one before and holds its probe size.
    fn assert_tiles(b: &[Band]) {
        for w in b.windows(2) {
            assert_eq!(w[0].max_bytes + 1, w[1].min_bytes, "{b:?}");
        }
        for x in b {
            assert!(
                x.min_bytes <= x.probe_bytes && x.probe_bytes <= x.max_bytes,
                "{x:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn bands_always_tile_and_hold_their_probe(sizes in prop::collection::vec(1u64..(1 << 40), 1..12)) {
            let b = bands(Collective::AllReduce, &sizes);
            prop_assert_eq!(b[0].min_bytes, *sizes.iter().min().unwrap());
            prop_assert_eq!(b[b.len() - 1].max_bytes, *sizes.iter().max().unwrap());
            assert_tiles(&b);
        }
    }

    #[test]
    fn bands_tile_the_sweep_without_gaps() {
        let sizes = [1 << 20, 4 << 20, 16 << 20, 64 << 20];
        let b = bands(Collective::AllGather, &sizes);
        assert_eq!(b.len(), 4);
        assert_eq!(b[0].min_bytes, 1 << 20);
        assert_eq!(b[0].max_bytes, (2 << 20) - 1);
        assert_eq!(b[1].min_bytes, 2 << 20);
        assert_eq!(b[3].max_bytes, 64 << 20);
        assert_tiles(&b);
    }

    #[test]
    fn tiny_neighbours_still_tile() {
        let b = bands(Collective::AllReduce, &[8, 9, 16]);
        assert_eq!((b[0].min_bytes, b[0].max_bytes), (8, 8));
        assert_eq!((b[1].min_bytes, b[1].max_bytes), (9, 11));
        assert_eq!((b[2].min_bytes, b[2].max_bytes), (12, 16));
        let b = bands(Collective::AllReduce, &[8, 64 << 10, 4 << 20, 512 << 20]);
        let edges: Vec<u64> = b.iter().skip(1).map(|x| x.min_bytes).collect();
        assert_eq!(edges, vec![768, 512 << 10, 48 << 20]);
    }

    #[test]
    fn channel_limit_forbids_and_default_is_never_a_candidate() {
        let mut space = CandidateSpace::default();
        space.extra.push(Setting::default());
        let (ok, forbidden) = candidates(&space, Collective::AllReduce, Some(16));
        assert!(ok.iter().all(|s| s.channels.is_none_or(|n| n <= 16)));
        assert_eq!(forbidden.len(), 2, "32 and 64 channels");
        assert!(ok.iter().all(|s| !s.is_default()));
        let (ok_b, _) = candidates(&space, Collective::Broadcast, None);
        assert!(ok_b
            .iter()
            .all(|s| s.algorithm.is_none_or(|a| a == Algorithm::Ring)));
    }

    /// A user's `--env` candidate is screened first, once, even when a
    /// built-in candidate is the same setting (NCCL's default buffer size
    /// spelled out: a 15 s search measured the 20 candidates before it and
    /// never reached it).
    #[test]
    fn the_users_own_candidates_come_first_and_once() {
        let mine = buffsize_candidates()
            .pop()
            .expect("the default spelled out");
        let space = CandidateSpace {
            asked: vec![mine.clone()],
            ..CandidateSpace::default()
        };
        let (ok, _) = candidates(&space, Collective::AllReduce, None);
        assert_eq!(ok[0], mine);
        assert_eq!(ok.iter().filter(|s| **s == mine).count(), 1);
    }
}
