//! Where the hosts' fabric groups come from (`check --groups`): a file of
//! `HOST GROUP` lines, or Slurm's topology (`scontrol show topology`: each
//! leaf switch, or each block of topology/block, is a group). The host
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
}

/// Why the groups could not be known (the host tests then run without
/// them, with a note).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FabricError {
    /// `scontrol show topology` could not run or said nothing usable.
    #[error("Slurm's topology: {0}")]
    Slurm(String),
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
pub fn resolve(source: &GroupSource, hosts: &[String]) -> Result<Vec<String>, FabricError> {
    let map = match source {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(resolve(&map, &hosts).unwrap(), ["g1", "g2", "(ungrouped)"]);
        let one = GroupSource::Map(vec![("a".into(), "g1".into())]);
        assert_eq!(resolve(&one, &hosts[..1]), Err(FabricError::OneGroup(1)));
    }
}
