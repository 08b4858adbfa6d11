//! Rank 0's report: one row per rank (missing ones too), the problems
//! found (missing ranks, versions that differ), as text or JSON.

use super::{Outcome, PreflightFormat, RankInfo};
use collbench_launch::control::PeerHello;
use collbench_launch::World;
use serde::Serialize;
use std::collections::BTreeMap;

/// Rank 0's view of the world, ready to print.
#[derive(Debug, Serialize)]
pub(super) struct Report {
    verdict: &'static str,
    problems: Vec<String>,
    world_size: usize,
    ranks_joined: usize,
    hosts: usize,
    launcher: String,
    rendezvous: String,
    ranks: Vec<Row>,
}

/// One rank's line; `info` is `None` for a missing rank.
#[derive(Debug, Serialize)]
struct Row {
    rank: usize,
    missing: bool,
    local_rank: Option<usize>,
    host: Option<String>,
    info: Option<RankInfo>,
}

impl Report {
    pub(super) fn new(
        world: &World,
        joined: &[PeerHello],
        missing: &[usize],
        mut problems: Vec<String>,
    ) -> Report {
        let mut ranks: Vec<Row> = joined
            .iter()
            .map(|h| Row {
                rank: h.rank,
                missing: false,
                local_rank: Some(h.local_rank),
                host: Some(h.host.clone()),
                info: serde_json::from_slice(&h.info).ok(),
            })
            .chain(missing.iter().map(|&rank| Row {
                rank,
                missing: true,
                local_rank: None,
                host: None,
                info: None,
            }))
            .collect();
        ranks.sort_by_key(|r| r.rank);
        problems.extend(version_problems(&ranks));
        let hosts = ranks
            .iter()
            .filter_map(|r| r.host.as_deref())
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        Report {
            verdict: if problems.is_empty() { "PASS" } else { "FAIL" },
            problems,
            world_size: world.world_size,
            ranks_joined: joined.len(),
            hosts,
            launcher: world.launcher.to_string(),
            rendezvous: world.rendezvous(),
            ranks,
        }
    }

    /// PASS when nothing is wrong.
    pub(super) fn outcome(&self) -> Outcome {
        if self.problems.is_empty() {
            Outcome::Pass
        } else {
            Outcome::Fail
        }
    }

    pub(super) fn render(&self, format: PreflightFormat) -> String {
        match format {
            PreflightFormat::Json => {
                serde_json::to_string_pretty(self).expect("report serializes") + "\n"
            }
            PreflightFormat::Text => self.text(),
        }
    }

    fn text(&self) -> String {
        let dash = || "-".to_string();
        let mut table = vec![[
            "rank",
            "host",
            "local",
            "pid",
            "backend",
            "GPUs",
            "driver",
            "NCCL",
            "collbench",
        ]
        .map(String::from)];
        for row in &self.ranks {
            let info = row.info.clone().unwrap_or_default();
            let or_dash = |s: String| if s.is_empty() { dash() } else { s };
            table.push(if row.missing {
                [
                    row.rank.to_string(),
                    "(missing)".into(),
                    dash(),
                    dash(),
                    dash(),
                    dash(),
                    dash(),
                    dash(),
                    dash(),
                ]
            } else {
                [
                    row.rank.to_string(),
                    row.host.clone().unwrap_or_else(dash),
                    row.local_rank.map_or_else(dash, |l| l.to_string()),
                    info.pid.to_string(),
                    or_dash(info.backend),
                    or_dash(info.gpus.join(",")),
                    info.driver.unwrap_or_else(dash),
                    info.nccl_version.unwrap_or_else(dash),
                    or_dash(info.collbench_version),
                ]
            });
        }
        let widths: Vec<usize> = (0..9)
            .map(|c| table.iter().map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        let ranks = if self.ranks_joined == self.world_size {
            plural(self.world_size, "rank")
        } else {
            format!("{} of {} ranks", self.ranks_joined, self.world_size)
        };
        let hosts = plural(self.hosts, "host");
        let mut out = format!(
            "collbench preflight: {ranks} on {hosts} (launcher {}, rank 0 at {})\n",
            self.launcher, self.rendezvous
        );
        for row in &table {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, &w)| format!("{cell:<w$}"))
                .collect();
            out += cells.join("  ").trim_end();
            out.push('\n');
        }
        match self.verdict {
            "PASS" => out += &format!("PASS: {ranks} on {hosts}, versions agree\n"),
            _ => out += &format!("FAIL: {}\n", self.problems.join("; ")),
        }
        out
    }
}

/// "1 host", "2 hosts".
fn plural(count: usize, noun: &str) -> String {
    match count {
        1 => format!("1 {noun}"),
        _ => format!("{count} {noun}s"),
    }
}

/// One problem per version that differs between ranks.
fn version_problems(rows: &[Row]) -> Vec<String> {
    type Field = fn(&RankInfo) -> Option<String>;
    let fields: [(&str, Field); 3] = [
        ("collbench version", |i| Some(i.collbench_version.clone())),
        ("driver version", |i| i.driver.clone()),
        ("NCCL version", |i| i.nccl_version.clone()),
    ];
    let mut problems = Vec::new();
    for (name, field) in fields {
        let mut by_value: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for row in rows {
            if let Some(info) = &row.info {
                let value = field(info).unwrap_or_else(|| "none".into());
                by_value.entry(value).or_default().push(row.rank);
            }
        }
        if by_value.len() > 1 {
            let groups: Vec<String> = by_value
                .iter()
                .map(|(v, ranks)| format!("{v} on {}", rank_ranges(ranks)))
                .collect();
            problems.push(format!(
                "{name} differs between ranks: {}",
                groups.join(", ")
            ));
        }
    }
    problems
}

/// "rank 3" or "ranks 0-2,5" from an ascending list.
fn rank_ranges(ranks: &[usize]) -> String {
    let mut spans: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        spans.push(if i == j {
            ranks[i].to_string()
        } else {
            format!("{}-{}", ranks[i], ranks[j])
        });
        i = j + 1;
    }
    let noun = if ranks.len() == 1 { "rank" } else { "ranks" };
    format!("{noun} {}", spans.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_launch::Launcher;

    fn world(n: usize) -> World {
        World {
            rank: 0,
            world_size: n,
            local_rank: 0,
            local_world_size: 1,
            hostname: "n1".into(),
            rendezvous_host: Some("n1".into()),
            rendezvous_port: 29517,
            bind: "0.0.0.0".into(),
            token: "t".into(),
            launcher: Launcher::Slurm,
        }
    }

    fn hello(rank: usize, host: &str, nccl: Option<&str>) -> PeerHello {
        let info = RankInfo {
            host: host.into(),
            pid: 100 + rank as u32,
            collbench_version: "0.1.0".into(),
            backend: "cpu".into(),
            nccl_version: nccl.map(String::from),
            ..RankInfo::default()
        };
        PeerHello {
            rank,
            local_rank: rank % 2,
            host: host.into(),
            pid: 100 + rank as u32,
            info: serde_json::to_vec(&info).unwrap(),
        }
    }

    #[test]
    fn agreeing_world_passes_and_counts_hosts() {
        let hellos: Vec<_> = (0..4)
            .map(|r| hello(r, if r < 2 { "n1" } else { "n2" }, Some("2.21.5")))
            .collect();
        let text = text_of_4_ranks(&hellos, Outcome::Pass);
        let head = "collbench preflight: 4 ranks on 2 hosts";
        assert!(text.starts_with(head), "{text}");
        let verdict = "PASS: 4 ranks on 2 hosts, versions agree\n";
        assert!(text.ends_with(verdict) && text.contains("2.21.5"), "{text}");
    }

    #[test]
    fn differing_nccl_versions_fail_naming_the_ranks() {
        let hellos = vec![
            hello(0, "n1", Some("2.21.5")),
            hello(1, "n1", Some("2.21.5")),
            hello(2, "n2", Some("2.19.3")),
            hello(3, "n2", None),
        ];
        let text = text_of_4_ranks(&hellos, Outcome::Fail);
        assert!(
            text.contains("FAIL: NCCL version differs between ranks: 2.19.3 on rank 2, 2.21.5 on ranks 0-1, none on rank 3"),
            "{text}"
        );
    }

    /// The text report of 4 ranks that all said `hellos`, whose outcome
    /// must be `outcome`.
    fn text_of_4_ranks(hellos: &[PeerHello], outcome: Outcome) -> String {
        let report = Report::new(&world(4), hellos, &[], vec![]);
        assert_eq!(report.outcome(), outcome);
        report.render(PreflightFormat::Text)
    }

    #[test]
    fn missing_ranks_are_rows_and_fail() {
        let report = Report::new(
            &world(3),
            &[hello(0, "n1", None)],
            &[1, 2],
            vec!["ranks 1, 2 did not join".into()],
        );
        let text = report.render(PreflightFormat::Text);
        assert!(text.contains("1 of 3 ranks on 1 host"), "{text}");
        assert!(text.contains("(missing)"), "{text}");
        assert!(text.contains("FAIL: ranks 1, 2 did not join"), "{text}");
        let json: serde_json::Value =
            serde_json::from_str(&report.render(PreflightFormat::Json)).unwrap();
        assert_eq!(json["verdict"], "FAIL");
        assert_eq!(json["ranks"][2]["missing"], true);
    }

    #[test]
    fn rank_range_phrases() {
        assert_eq!(rank_ranges(&[3]), "rank 3");
        assert_eq!(rank_ranges(&[0, 1, 2, 5, 7, 8]), "ranks 0-2,5,7-8");
    }
}
