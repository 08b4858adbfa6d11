//! What the library reported it ran for one placement of a case
//! (`--explain`): per kernel, NCCL's algorithm, protocol and channel count,
//! as NCCL's profiler interface reports them, and whether nccl-tests' busbw
//! formula describes what ran.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Algorithms that reduce or replicate data in the network or through
/// NVLink multicast (NVLS, NVLS_TREE, CollNet), in NCCL's profiler and
/// TUNING-log spelling and in its tuning-table spelling.
const IN_NETWORK_ALGOS: [&str; 8] = [
    "NVLS",
    "NVLS_TREE",
    "NVLSTREE",
    "COLLNET_DIRECT",
    "COLLNET_CHAIN",
    "COLLNETDIRECT",
    "COLLNETCHAIN",
    "COLLNET",
];

/// What the footnote and the JSON say about such rows.
pub const BUSBW_NOTE: &str = "in-network or multicast algorithm: nccl-tests' busbw formula assumes data crosses the links (n-1)/n times and overstates link use here";

/// The footnote of a row that moved no data.
pub const NOTHING_LAUNCHED: &str =
    "0-byte rows: 0 elements per rank, NCCL returns at once and launches nothing";

/// One kernel NCCL reported for a case: a collective with its algorithm and
/// protocol, or one side of a send/recv.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    Default,
    schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct KernelChoice {
    /// The operation as NCCL names it: `AllReduce`, `AllGather`, `Send`,
    /// `Recv`, ...
    pub func: String,
    /// Algorithm as NCCL reports it: `RING`, `TREE`, `NVLS`, `NVLS_TREE`,
    /// `COLLNET_DIRECT`, `COLLNET_CHAIN`, `PAT`. Empty for send/recv, for
    /// which NCCL reports none.
    #[serde(default)]
    pub algo: String,
    /// Protocol: `LL`, `LL128`, `SIMPLE`. Empty for send/recv.
    #[serde(default)]
    pub proto: String,
    /// Channels NCCL used (NCCL < 2.26, profiler interface v2/v3: the most
    /// it could use; none for send/recv there, reported as 0).
    #[serde(default)]
    pub channels: u64,
}

impl KernelChoice {
    /// The kernel `func` run with `algo` and `proto` on `channels` channels
    /// (`algo` and `proto` empty for send/recv).
    pub fn new(func: &str, algo: &str, proto: &str, channels: u64) -> KernelChoice {
        KernelChoice {
            func: func.into(),
            algo: algo.into(),
            proto: proto.into(),
            channels,
        }
    }

    /// A send or receive (no algorithm or protocol).
    pub fn is_p2p(&self) -> bool {
        self.algo.is_empty()
    }

    /// NCCL reduced or replicated data in the network or by multicast, so
    /// busbw overstates link use.
    pub fn in_network(&self) -> bool {
        let a = self.algo.to_ascii_uppercase();
        IN_NETWORK_ALGOS.contains(&a.as_str())
    }

    /// The algorithm column: the algorithm, or the operation for send/recv.
    pub fn algo_label(&self) -> &str {
        if self.is_p2p() {
            &self.func
        } else {
            &self.algo
        }
    }
}

/// What NCCL ran for one placement (out-of-place or in-place) of a case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Explanation {
    /// Every distinct kernel choice, over the case's ranks and iterations,
    /// sorted. Several where a case ran several kernels (send/recv pairs).
    #[serde(default)]
    pub kernels: Vec<KernelChoice>,
    /// Why NCCL reported nothing (e.g. the user's own
    /// NCCL_PROFILER_PLUGIN, or an NCCL without the profiler interface).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Ranks that ran the case but reported no kernel for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_ranks: Vec<u64>,
    /// Events the profiler plugin lost because its buffer was full.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_events: u64,
    /// An in-network or multicast algorithm ran (NVLS, NVLS_TREE, CollNet):
    /// busbw, computed as nccl-tests does, overstates link use.
    #[serde(default)]
    pub busbw_overstated: bool,
    /// [`BUSBW_NOTE`] when `busbw_overstated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busbw_note: Option<String>,
    /// The case moves no data (0 elements per rank, e.g. 8 B of
    /// all_gather over 2 ranks of floats): NCCL returns at once and
    /// launches no kernel, so there is nothing to explain and no TUNING
    /// line to agree with.
    #[serde(default, skip_serializing_if = "is_false")]
    pub nothing_launched: bool,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

impl Explanation {
    /// The explanation of a case from the kernels its ranks reported
    /// (duplicates removed), the ranks that reported nothing and the events
    /// lost.
    pub fn from_kernels(
        kernels: impl IntoIterator<Item = KernelChoice>,
        missing_ranks: impl IntoIterator<Item = u64>,
        dropped_events: u64,
    ) -> Explanation {
        let kernels: BTreeSet<KernelChoice> = kernels.into_iter().collect();
        let missing: BTreeSet<u64> = missing_ranks.into_iter().collect();
        let overstated = kernels.iter().any(KernelChoice::in_network);
        Explanation {
            kernels: kernels.into_iter().collect(),
            unavailable: None,
            missing_ranks: missing.into_iter().collect(),
            dropped_events,
            busbw_overstated: overstated,
            busbw_note: overstated.then(|| BUSBW_NOTE.to_string()),
            nothing_launched: false,
        }
    }

    /// A case of 0 elements: NCCL launched nothing.
    pub fn nothing_launched() -> Explanation {
        Explanation {
            unavailable: Some(NOTHING_LAUNCHED.to_string()),
            nothing_launched: true,
            ..Explanation::default()
        }
    }

    /// NCCL could not say, for `reason`.
    pub fn unavailable(reason: impl Into<String>) -> Explanation {
        Explanation {
            unavailable: Some(reason.into()),
            ..Explanation::default()
        }
    }

    /// One explanation from each process's: kernels and missing ranks
    /// joined, lost events added. A reason for "unavailable" survives only
    /// when no process reported a kernel.
    pub fn merge(parts: impl IntoIterator<Item = Explanation>) -> Explanation {
        let mut kernels = Vec::new();
        let mut missing = Vec::new();
        let mut dropped = 0;
        let mut reason = None;
        let mut nothing_launched = None;
        for p in parts {
            nothing_launched = Some(nothing_launched.unwrap_or(true) && p.nothing_launched);
            kernels.extend(p.kernels);
            missing.extend(p.missing_ranks);
            dropped += p.dropped_events;
            reason = reason.or(p.unavailable);
        }
        let mut e = Explanation::from_kernels(kernels, missing, dropped);
        if e.kernels.is_empty() {
            e.nothing_launched = nothing_launched.unwrap_or(false);
            e.unavailable = reason;
        }
        e
    }

    /// Distinct values of `field` over the kernels, in kernel order, joined
    /// by `+`; `-` where there are none.
    fn joined(&self, field: impl Fn(&KernelChoice) -> String) -> String {
        let mut seen: Vec<String> = Vec::new();
        for k in &self.kernels {
            let v = field(k);
            if !v.is_empty() && !seen.contains(&v) {
                seen.push(v);
            }
        }
        if seen.is_empty() {
            "-".to_string()
        } else {
            seen.join("+")
        }
    }

    /// The algorithm column: `RING`, `RING+TREE`, `Recv+Send` for send/recv.
    pub fn algo_text(&self) -> String {
        self.joined(|k| k.algo_label().to_string())
    }

    /// The protocol column: `LL`, `SIMPLE`, `-` for send/recv only.
    pub fn proto_text(&self) -> String {
        self.joined(|k| k.proto.clone())
    }

    /// The channel column: `24`, `2+4` when kernels differ.
    pub fn channels_text(&self) -> String {
        self.joined(|k| k.channels.to_string())
    }

    /// Every kernel as `func:algo/proto/channels`, joined by `;` (send/recv:
    /// `Send:-/-/2`).
    pub fn kernels_text(&self) -> String {
        let dash = |s: &str| {
            if s.is_empty() {
                "-".to_string()
            } else {
                s.to_string()
            }
        };
        self.kernels
            .iter()
            .map(|k| {
                format!(
                    "{}:{}/{}/{}",
                    k.func,
                    dash(&k.algo),
                    dash(&k.proto),
                    k.channels
                )
            })
            .collect::<Vec<_>>()
            .join(";")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(func: &str, algo: &str, proto: &str, channels: u64) -> KernelChoice {
        KernelChoice {
            func: func.into(),
            algo: algo.into(),
            proto: proto.into(),
            channels,
        }
    }

    #[test]
    fn a_case_of_nothing_says_so_through_a_merge() {
        let e = Explanation::merge([
            Explanation::nothing_launched(),
            Explanation::nothing_launched(),
        ]);
        assert!(e.nothing_launched);
        assert_eq!(e.unavailable.as_deref(), Some(NOTHING_LAUNCHED));
        let mixed = Explanation::merge([
            Explanation::nothing_launched(),
            Explanation::unavailable("x"),
        ]);
        assert!(!mixed.nothing_launched);
    }

    #[test]
    fn duplicates_collapse_and_order_is_stable() {
        let e = Explanation::from_kernels(
            [
                k("AllReduce", "RING", "LL", 2),
                k("AllReduce", "RING", "LL", 2),
                k("AllReduce", "TREE", "LL128", 4),
            ],
            [],
            0,
        );
        assert_eq!(e.kernels.len(), 2);
        assert_eq!(e.algo_text(), "RING+TREE");
        assert_eq!(e.proto_text(), "LL+LL128");
        assert_eq!(e.channels_text(), "2+4");
        assert!(!e.busbw_overstated);
        assert_eq!(e.busbw_note, None);
    }

    #[test]
    fn send_recv_shows_the_operations() {
        let e = Explanation::from_kernels([k("Send", "", "", 1), k("Recv", "", "", 1)], [], 0);
        assert_eq!(e.algo_text(), "Recv+Send");
        assert_eq!(e.proto_text(), "-");
        assert_eq!(e.channels_text(), "1");
        assert_eq!(e.kernels_text(), "Recv:-/-/1;Send:-/-/1");
    }

    #[test]
    fn in_network_algorithms_are_marked() {
        for algo in [
            "NVLS",
            "NVLS_TREE",
            "COLLNET_DIRECT",
            "COLLNET_CHAIN",
            "NVLSTree",
        ] {
            let e = Explanation::from_kernels([k("AllReduce", algo, "SIMPLE", 16)], [], 0);
            assert!(e.busbw_overstated, "{algo}");
            assert_eq!(e.busbw_note.as_deref(), Some(BUSBW_NOTE));
        }
        for algo in ["RING", "TREE", "PAT"] {
            let e = Explanation::from_kernels([k("AllReduce", algo, "SIMPLE", 16)], [], 0);
            assert!(!e.busbw_overstated, "{algo}");
        }
    }

    #[test]
    fn merge_joins_processes_and_keeps_a_reason_only_without_kernels() {
        let a = Explanation::from_kernels([k("AllReduce", "RING", "LL", 1)], [3], 2);
        let b = Explanation::from_kernels([k("AllReduce", "RING", "LL", 1)], [1], 1);
        let m = Explanation::merge([a, b.clone(), Explanation::unavailable("x")]);
        assert_eq!(m.kernels.len(), 1);
        assert_eq!(m.missing_ranks, vec![1, 3]);
        assert_eq!(m.dropped_events, 3);
        assert_eq!(m.unavailable, None);
        let none = Explanation::merge([Explanation::unavailable("no plugin")]);
        assert_eq!(none.unavailable.as_deref(), Some("no plugin"));
        assert_eq!(none.algo_text(), "-");
    }

    #[test]
    fn json_round_trip() {
        let e = Explanation::from_kernels([k("AllReduce", "NVLS", "SIMPLE", 16)], [], 0);
        let s = serde_json::to_string(&e).unwrap();
        assert!(s.contains("\"busbw_overstated\":true"), "{s}");
        let back: Explanation = serde_json::from_str(&s).unwrap();
        assert_eq!(back, e);
    }
}
