//! Where the hosts' fabric groups come from (`check --groups`): a file of
//! `HOST GROUP` lines, Slurm's topology (`scontrol show topology`: each
//! leaf switch, or each block of topology/block, is a group), or
//! Kubernetes node labels (`label`, `label:KEY`). The host
//! tests then test within groups first and across them after
//! ([`crate::hosts::groups`]).

use std::process::Command;

/// A source of the hosts' groups.
#[derive(Debug, Clone, PartialEq)]
pub enum GroupSource {
    /// Host -> group, read from a file by the CLI before any work.
    Map(Vec<(String, String)>),
    /// Slurm's topology, read by rank 0 when the host tests start.
    Slurm,
    /// Kubernetes node labels, read from the API server by rank 0: this
    /// label, or (None) the finest of the known topology labels that every
    /// node has ([`KNOWN_LABELS`], then `network.topology.nvidia.com/*`).
    Labels(Option<String>),
}

/// Topology labels tried by `--groups label`, in this order of preference
/// among those that split the nodes equally finely.
pub const KNOWN_LABELS: [&str; 2] = [
    "cloud.google.com/gce-topology-block",
    "nvidia.com/gpu.clique",
];

/// The prefix of NVIDIA's network topology labels.
pub const NVIDIA_TOPOLOGY: &str = "network.topology.nvidia.com/";

/// Why the groups could not be known (the host tests then run without
/// them, with a note).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FabricError {
    /// `scontrol show topology` could not run or said nothing usable.
    #[error("Slurm's topology: {0}")]
    Slurm(String),
    /// The nodes' labels could not be read, or none groups them.
    #[error("node labels: {0}")]
    Labels(String),
    /// Fewer than two groups among the job's hosts: nothing to test across.
    #[error("the job's hosts are in {0} group(s): grouping needs two or more")]
    OneGroup(usize),
}

/// The group file's lines (`HOST GROUP`, `#` comments, blank lines),
/// or the first bad line, with its number.
pub fn parse_group_file(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            [host, group] => out.push((host.to_string(), group.to_string())),
            _ => {
                return Err(format!(
                    "line {}: '{line}' is not 'HOST GROUP' (one host and its group per line)",
                    i + 1
                ))
            }
        }
    }
    if out.is_empty() {
        return Err("no 'HOST GROUP' line: write one host and its group per line".into());
    }
    Ok(out)
}

/// Slurm's `NAME[1-3,7],other` host list, expanded.
pub fn expand_hostlist(list: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&list[start..]);
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        let Some((prefix, rest)) = part.split_once('[') else {
            out.push(part.to_string());
            continue;
        };
        let (ranges, suffix) = rest.split_once(']').unwrap_or((rest, ""));
        for range in ranges.split(',') {
            let (lo, hi) = range.split_once('-').unwrap_or((range, range));
            let width = lo.len();
            match (lo.parse::<u64>(), hi.parse::<u64>()) {
                (Ok(lo), Ok(hi)) if lo <= hi && hi - lo < 100_000 => {
                    out.extend((lo..=hi).map(|n| format!("{prefix}{n:0width$}{suffix}")))
                }
                _ => out.push(format!("{prefix}{range}{suffix}")),
            }
        }
    }
    out
}

/// Host -> group from `scontrol show topology` (or topology.conf): the
/// leaf switches (`Level=0`, or no `Switches=` of their own) and blocks
/// (`BlockName=`), each with its `Nodes=`.
pub fn parse_slurm_topology(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .map(str::to_string)
        };
        let name = field("SwitchName=").or_else(|| field("BlockName="));
        let (Some(name), Some(nodes)) = (name, field("Nodes=")) else {
            continue;
        };
        let leaf = field("Level=").is_none_or(|l| l == "0") && field("Switches=").is_none();
        if leaf || line.contains("BlockName=") {
            out.extend(
                expand_hostlist(&nodes)
                    .into_iter()
                    .map(|n| (n, name.clone())),
            );
        }
    }
    out
}

/// Each of `hosts`' group by `source` (a host the source does not know is
/// in a group of its own, `(ungrouped)`).
pub fn resolve(
    source: &GroupSource,
    hosts: &[String],
    nodes: &[String],
) -> Result<Vec<String>, FabricError> {
    let map = match source {
        GroupSource::Labels(key) => {
            let groups = groups_from_labels(&node_labels(nodes)?, key.as_deref())?;
            hosts.iter().cloned().zip(groups).collect()
        }
        GroupSource::Map(m) => m.clone(),
        GroupSource::Slurm => {
            let out = Command::new("scontrol")
                .args(["show", "topology"])
                .output()
                .map_err(|e| FabricError::Slurm(format!("cannot run scontrol: {e}")))?;
            if !out.status.success() {
                let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
                return Err(FabricError::Slurm(why));
            }
            parse_slurm_topology(&String::from_utf8_lossy(&out.stdout))
        }
    };
    let groups: Vec<String> = hosts
        .iter()
        .map(|h| {
            map.iter()
                .find(|(host, _)| host == h)
                .map_or_else(|| "(ungrouped)".to_string(), |(_, g)| g.clone())
        })
        .collect();
    let mut distinct = groups.clone();
    distinct.sort();
    distinct.dedup();
    if distinct.len() < 2 {
        return Err(FabricError::OneGroup(distinct.len()));
    }
    Ok(groups)
}

/// Each node's labels, from the API server (the pod's service account).
fn node_labels(nodes: &[String]) -> Result<Vec<serde_json::Value>, FabricError> {
    use crate::kube_api::{ApiServer, InCluster};
    let api = InCluster::from_env(|k| std::env::var(k).ok())
        .map_err(|e| FabricError::Labels(e.to_string()))?;
    nodes
        .iter()
        .map(|n| {
            api.get_node(n)
                .map(|node| node["metadata"]["labels"].clone())
                .map_err(|e| FabricError::Labels(e.to_string()))
        })
        .collect()
}

/// Each node's group from its labels (`labels[i]`: node i's label map):
/// `key`'s value, or the label every node has that splits them most
/// finely without giving each node a group of its own.
pub fn groups_from_labels(
    labels: &[serde_json::Value],
    key: Option<&str>,
) -> Result<Vec<String>, FabricError> {
    let value = |l: &serde_json::Value, k: &str| l[k].as_str().map(str::to_string);
    let key = match key {
        Some(k) => k.to_string(),
        None => {
            let mut keys: Vec<String> = KNOWN_LABELS.iter().map(|k| k.to_string()).collect();
            let mut nvidia: Vec<String> = labels
                .iter()
                .filter_map(|l| l.as_object())
                .flat_map(|m| m.keys().filter(|k| k.starts_with(NVIDIA_TOPOLOGY)).cloned())
                .collect();
            nvidia.sort();
            nvidia.dedup();
            keys.extend(nvidia);
            let split = |k: &String| {
                let mut v: Vec<String> = labels.iter().filter_map(|l| value(l, k)).collect();
                let everyone = v.len() == labels.len();
                v.sort();
                v.dedup();
                (everyone && v.len() >= 2 && v.len() < labels.len()).then_some(v.len())
            };
            let best = keys
                .iter()
                .filter_map(|k| Some((split(k)?, k)))
                .max_by_key(|(n, _)| *n);
            match best {
                Some((_, k)) => k.clone(),
                None => {
                    return Err(FabricError::Labels(format!(
                        "no topology label groups the nodes ({}, {NVIDIA_TOPOLOGY}*); name one with --groups label:KEY",
                        KNOWN_LABELS.join(", ")
                    )))
                }
            }
        }
    };
    Ok(labels
        .iter()
        .map(|l| value(l, &key).unwrap_or_else(|| "(unlabelled)".into()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_labels_group_by_the_finest_known_label_or_the_one_named() {
        let node = |block: &str, clique: &str| serde_json::json!({"cloud.google.com/gce-topology-block": block, "nvidia.com/gpu.clique": clique, "x": "y"});
        let labels = [
            node("b1", "c1"),
            node("b1", "c2"),
            node("b2", "c3"),
            node("b2", "c3"),
        ];
        // The clique splits the four nodes in three, the block in two.
        assert_eq!(
            groups_from_labels(&labels, None).unwrap(),
            ["c1", "c2", "c3", "c3"]
        );
        assert_eq!(
            groups_from_labels(&labels, Some("cloud.google.com/gce-topology-block")).unwrap(),
            ["b1", "b1", "b2", "b2"]
        );
        assert_eq!(groups_from_labels(&labels, Some("x")).unwrap(), ["y"; 4]);
        let plain = [serde_json::json!({"a": "b"}), serde_json::json!({})];
        assert!(matches!(
            groups_from_labels(&plain, None),
            Err(FabricError::Labels(_))
        ));
        let nv = [
            serde_json::json!({"network.topology.nvidia.com/leaf": "l1"}),
            serde_json::json!({"network.topology.nvidia.com/leaf": "l1"}),
            serde_json::json!({"network.topology.nvidia.com/leaf": "l2"}),
        ];
        assert_eq!(groups_from_labels(&nv, None).unwrap(), ["l1", "l1", "l2"]);
    }

    #[test]
    fn a_group_file_is_host_and_group_per_line() {
        let text = "# leaf switches\nn0 leaf1\nn1 leaf1  # rack 3\n\nn2 leaf2\n";
        let map = parse_group_file(text).unwrap();
        assert_eq!(map.len(), 3);
        assert_eq!(map[2], ("n2".to_string(), "leaf2".to_string()));
        let e = parse_group_file("n0 leaf1\nn1\n").unwrap_err();
        assert_eq!(
            e,
            "line 2: 'n1' is not 'HOST GROUP' (one host and its group per line)"
        );
        assert!(parse_group_file("# nothing\n").is_err());
    }

    #[test]
    fn slurm_host_lists_expand_with_their_zeros() {
        assert_eq!(expand_hostlist("n[1-3],m7"), ["n1", "n2", "n3", "m7"]);
        assert_eq!(
            expand_hostlist("gpu[08-10,12]"),
            ["gpu08", "gpu09", "gpu10", "gpu12"]
        );
        assert_eq!(expand_hostlist("a,b"), ["a", "b"]);
    }

    #[test]
    fn slurms_leaf_switches_and_blocks_are_the_groups() {
        let tree = "SwitchName=s0 Level=0 LinkSpeed=1 Nodes=n[1-2]\n\
                    SwitchName=s1 Level=0 LinkSpeed=1 Nodes=n[3-4]\n\
                    SwitchName=spine Level=1 LinkSpeed=1 Nodes=n[1-4] Switches=s[0-1]\n";
        let map = parse_slurm_topology(tree);
        assert_eq!(map.len(), 4, "{map:?}");
        assert!(map.contains(&("n3".to_string(), "s1".to_string())));
        let blocks = "BlockName=b1 BlockIndex=0 Nodes=dgx[01-02] BlockSize=2\n";
        assert_eq!(parse_slurm_topology(blocks)[1].0, "dgx02");
    }

    #[test]
    fn unknown_hosts_are_ungrouped_and_one_group_is_no_grouping() {
        let map = GroupSource::Map(vec![("a".into(), "g1".into()), ("b".into(), "g2".into())]);
        let hosts = ["a".to_string(), "b".to_string(), "c".to_string()];
        assert_eq!(
            resolve(&map, &hosts, &hosts).unwrap(),
            ["g1", "g2", "(ungrouped)"]
        );
        let one = GroupSource::Map(vec![("a".into(), "g1".into())]);
        assert_eq!(
            resolve(&one, &hosts[..1], &hosts[..1]),
            Err(FabricError::OneGroup(1))
        );
    }
}
