//! What `tune` varies: a candidate NCCL configuration ([`Setting`]), the
//! case it is measured on ([`Case`]) and what a setting costs the
//! application ([`Cost`]).
//!
//! Names follow NCCL's own: algorithms and protocols are spelled as in the
//! example tuner's CSV (`ring`, `ll128`), with their ids from NCCL's
//! `tuner.h` (`NCCL_ALGO_*`, `NCCL_PROTO_*`), so the CSV, the C plugin and
//! the report all agree.

use collbench_core::Collective;
use serde::{Deserialize, Serialize};
use std::fmt;

/// An axis of NCCL's tuner cost table (the algorithm or the protocol):
/// a value's id is its index in NCCL's order, and the same index finds its
/// name in the example tuner's CSV and in NCCL's own variable.
pub trait TunerAxis: Copy + PartialEq + 'static {
    /// Every value, in NCCL id order (`NCCL_ALGO_*`, `NCCL_PROTO_*`).
    const ALL: &'static [Self];
    /// Each value's name in the example tuner's CSV (`nvls_tree`, `ll128`).
    const CSV_NAMES: &'static [&'static str];
    /// The value `NCCL_ALGO` or `NCCL_PROTO` takes for each value alone.
    const ENV_NAMES: &'static [&'static str];

    /// NCCL's id: the index into the tuner's cost table.
    fn nccl_id(self) -> i32 {
        Self::ALL.iter().position(|v| *v == self).unwrap_or(0) as i32
    }

    /// The name in the example tuner's CSV.
    fn csv_name(self) -> &'static str {
        Self::CSV_NAMES[self.nccl_id() as usize]
    }

    /// The value NCCL's variable takes for this value alone.
    fn env_name(self) -> &'static str {
        Self::ENV_NAMES[self.nccl_id() as usize]
    }

    /// Parses the CSV name.
    fn from_csv(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.csv_name() == s)
    }
}

/// An NCCL algorithm, with the id NCCL's tuner interface gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    Tree,
    Ring,
    CollnetDirect,
    CollnetChain,
    Nvls,
    NvlsTree,
    Pat,
}

impl Algorithm {
    /// Every algorithm, in NCCL id order.
    pub const ALL: [Algorithm; 7] = [
        Algorithm::Tree,
        Algorithm::Ring,
        Algorithm::CollnetDirect,
        Algorithm::CollnetChain,
        Algorithm::Nvls,
        Algorithm::NvlsTree,
        Algorithm::Pat,
    ];
}

impl TunerAxis for Algorithm {
    const ALL: &'static [Algorithm] = &Algorithm::ALL;
    const CSV_NAMES: &'static [&'static str] = &[
        "tree",
        "ring",
        "collnet_direct",
        "collnet_chain",
        "nvls",
        "nvls_tree",
        "pat",
    ];
    const ENV_NAMES: &'static [&'static str] = &[
        "Tree",
        "Ring",
        "CollnetDirect",
        "CollnetChain",
        "NVLS",
        "NVLSTree",
        "PAT",
    ];
}

/// An NCCL protocol, with the id NCCL's tuner interface gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    Ll,
    Ll128,
    Simple,
}

impl Protocol {
    /// Every protocol, in NCCL id order.
    pub const ALL: [Protocol; 3] = [Protocol::Ll, Protocol::Ll128, Protocol::Simple];
}

impl TunerAxis for Protocol {
    const ALL: &'static [Protocol] = &Protocol::ALL;
    const CSV_NAMES: &'static [&'static str] = &["ll", "ll128", "simple"];
    const ENV_NAMES: &'static [&'static str] = &["LL", "LL128", "Simple"];
}

/// How the user buffers are registered with NCCL (nccl-tests `-R`): one
/// type with the command line's and the backend's.
pub use collbench_core::Registration;

/// `ncclConfig_t.CTAPolicy` (NCCL 2.27+).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CtaPolicy {
    /// `NCCL_CTA_POLICY_DEFAULT` (0).
    #[default]
    Default,
    /// `NCCL_CTA_POLICY_EFFICIENCY` (1): fewest CTAs for decent speed.
    Efficiency,
    /// `NCCL_CTA_POLICY_ZERO` (2, NCCL 2.28+): no CTAs where NCCL can.
    Zero,
}

impl CtaPolicy {
    /// The `NCCL_CTA_POLICY_*` value.
    pub fn nccl_value(self) -> i32 {
        match self {
            CtaPolicy::Default => 0,
            CtaPolicy::Efficiency => 1,
            CtaPolicy::Zero => 2,
        }
    }
}

/// One candidate NCCL configuration. `Setting::default()` is NCCL's own
/// choice for everything; each field set away from its default is one
/// change from it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Setting {
    /// Fixed channel count: `minCTAs = maxCTAs = n` in `ncclConfig_t`
    /// (per call: the tuner plugin's `nChannels`). `None`: NCCL's choice.
    pub channels: Option<u32>,
    /// Forced algorithm (through the tuner plugin). `None`: NCCL's choice.
    pub algorithm: Option<Algorithm>,
    /// Forced protocol (through the tuner plugin). `None`: NCCL's choice.
    pub protocol: Option<Protocol>,
    /// Buffer registration.
    pub registration: Registration,
    /// CTA policy of the communicator.
    pub cta_policy: CtaPolicy,
    /// Other `NCCL_*` variables (name, value), for knobs that only exist
    /// as environment variables (e.g. `NCCL_BUFFSIZE`). NCCL reads them
    /// once per process, so the measurer runs such a setting in a child
    /// process (see docs/tune.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<(String, String)>,
}

impl Setting {
    /// True for NCCL's defaults (nothing changed).
    pub fn is_default(&self) -> bool {
        *self == Setting::default()
    }

    /// Whether environment variables alone can set it for a whole
    /// process (anything but buffer registration, which needs the
    /// application).
    pub fn set_by_environment(&self) -> bool {
        self.channels.is_some()
            || self.algorithm.is_some()
            || self.protocol.is_some()
            || self.cta_policy != CtaPolicy::Default
            || !self.env.is_empty()
    }

    /// What this setting takes from the application.
    pub fn cost(&self) -> Cost {
        Cost {
            channels: self.channels,
            registration: self.registration,
        }
    }
}

impl fmt::Display for Setting {
    /// Short label: `default`, `channels=64`, `ring/ll128`, `-R 2`, joined
    /// by `, ` when several fields change.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(n) = self.channels {
            parts.push(format!("channels={n}"));
        }
        match (self.algorithm, self.protocol) {
            (Some(a), Some(p)) => parts.push(format!("{}/{}", a.csv_name(), p.csv_name())),
            (Some(a), None) => parts.push(format!("algo={}", a.csv_name())),
            (None, Some(p)) => parts.push(format!("proto={}", p.csv_name())),
            (None, None) => {}
        }
        match self.registration {
            Registration::None => {}
            Registration::Local => parts.push("-R 1".to_string()),
            Registration::Symmetric => parts.push("-R 2".to_string()),
        }
        match self.cta_policy {
            CtaPolicy::Default => {}
            CtaPolicy::Efficiency => parts.push("cta=efficiency".to_string()),
            CtaPolicy::Zero => parts.push("cta=zero".to_string()),
        }
        for (k, v) in &self.env {
            parts.push(format!("{k}={v}"));
        }
        if parts.is_empty() {
            f.write_str("default")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// What a setting takes from the application running next to NCCL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    /// Channels (one CTA, i.e. one SM, each) the setting fixes; `None`:
    /// as many as NCCL picks by default.
    pub channels: Option<u32>,
    /// Registered or symmetric memory the application must provide.
    pub registration: Registration,
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sms = match self.channels {
            Some(n) => format!("{n} SMs"),
            None => "default SMs".to_string(),
        };
        match self.registration {
            Registration::None => f.write_str(&sms),
            Registration::Local => write!(f, "{sms}, registered buffers"),
            Registration::Symmetric => write!(f, "{sms}, symmetric windows"),
        }
    }
}

/// The algorithm and protocol NCCL ran (or is told to run) for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AlgoProto {
    pub algorithm: Algorithm,
    pub protocol: Protocol,
}

impl fmt::Display for AlgoProto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}",
            self.algorithm.csv_name(),
            self.protocol.csv_name()
        )
    }
}

/// One measured case: an op at one message size (bytes as nccl-tests'
/// `size` column, which is also the `nBytes` NCCL hands its tuner).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Case {
    pub op: Collective,
    pub bytes: u64,
}

/// The example tuner's `collective_type` name for an op, where NCCL's
/// tuner interface covers it (`allreduce`); `None` for the others.
pub fn tuner_coll_name(op: Collective) -> Option<&'static str> {
    match op {
        Collective::Broadcast => Some("broadcast"),
        Collective::Reduce => Some("reduce"),
        Collective::AllGather => Some("allgather"),
        Collective::ReduceScatter => Some("reducescatter"),
        Collective::AllReduce => Some("allreduce"),
        _ => None,
    }
}

/// The op for a `collective_type` name of the example tuner's CSV.
pub fn tuner_coll_from_name(s: &str) -> Option<Collective> {
    [
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllReduce,
    ]
    .into_iter()
    .find(|c| tuner_coll_name(*c) == Some(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_nccl_tuner_h() {
        assert_eq!(Algorithm::Tree.nccl_id(), 0);
        assert_eq!(Algorithm::Ring.nccl_id(), 1);
        assert_eq!(Algorithm::Nvls.nccl_id(), 4);
        assert_eq!(Algorithm::Pat.nccl_id(), 6);
        assert_eq!(Protocol::Ll.nccl_id(), 0);
        assert_eq!(Protocol::Simple.nccl_id(), 2);
    }

    #[test]
    fn labels_name_every_change() {
        assert_eq!(Setting::default().to_string(), "default");
        let s = Setting {
            channels: Some(64),
            algorithm: Some(Algorithm::Ring),
            protocol: Some(Protocol::Ll128),
            registration: Registration::Symmetric,
            cta_policy: CtaPolicy::Efficiency,
            env: vec![("NCCL_BUFFSIZE".into(), "4194304".into())],
        };
        assert_eq!(
            s.to_string(),
            "channels=64, ring/ll128, -R 2, cta=efficiency, NCCL_BUFFSIZE=4194304"
        );
        assert_eq!(s.cost().to_string(), "64 SMs, symmetric windows");
    }

    /// The names are tables in id order: one per value, none twice.
    fn names_fit<T: TunerAxis>() {
        for names in [T::CSV_NAMES, T::ENV_NAMES] {
            assert_eq!(names.len(), T::ALL.len(), "{names:?}");
            let set: std::collections::HashSet<_> = names.iter().collect();
            assert_eq!(set.len(), names.len(), "{names:?}");
        }
    }

    #[test]
    fn each_value_has_its_own_names_in_id_order() {
        names_fit::<Algorithm>();
        names_fit::<Protocol>();
        assert_eq!(Algorithm::NvlsTree.csv_name(), "nvls_tree");
        assert_eq!(Algorithm::NvlsTree.env_name(), "NVLSTree");
        assert_eq!(Algorithm::Pat.env_name(), "PAT");
        assert_eq!(Protocol::Ll128.csv_name(), "ll128");
        assert_eq!(Protocol::Simple.env_name(), "Simple");
    }

    #[test]
    fn csv_names_round_trip() {
        for a in Algorithm::ALL {
            assert_eq!(Algorithm::from_csv(a.csv_name()), Some(a));
        }
        for p in Protocol::ALL {
            assert_eq!(Protocol::from_csv(p.csv_name()), Some(p));
        }
        for c in Collective::ALL {
            if let Some(n) = tuner_coll_name(c) {
                assert_eq!(tuner_coll_from_name(n), Some(c));
            }
        }
    }
}
