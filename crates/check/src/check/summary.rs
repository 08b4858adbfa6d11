//! What `check` prints on stdout: a heading naming the baseline, the
//! verdict table and its notes, the pair tests' matrices and findings,
//! and a last line with the verdict. Writing to a String cannot fail, so
//! `writeln!`'s result is dropped throughout.

use crate::baseline::Baseline;
use crate::host_tests::HostReport;
use crate::hosts;
use crate::localize::{self, Localization};
use crate::transport::TransportReport;
use crate::verdict::{self, Line, Status};
use std::fmt::Write;

/// The table and verdict lines `check` prints on stdout.
pub(super) fn summary(
    lines: &[Line],
    loc: Option<&Localization>,
    host_report: Option<&HostReport>,
    notes: &[String],
    baseline: Option<&Baseline>,
    status: Status,
) -> String {
    let mut out = heading(baseline);
    out += &verdict::render_table(lines);
    for l in lines.iter().filter(|l| l.note.is_some()) {
        let _ = writeln!(
            out,
            "# {} {}: {}",
            l.status.label(),
            l.op,
            l.note.as_deref().unwrap_or_default()
        );
    }
    if let Some(loc) = loc {
        out += &rank_pairs(loc);
    }
    if let Some(h) = host_report {
        out += &host_pairs(h);
    }
    for n in notes {
        let _ = writeln!(out, "# note: {n}");
    }
    out + &last_line(lines, baseline, status)
}

/// The first line: which baseline the figures are judged against, or
/// that none is.
fn heading(baseline: Option<&Baseline>) -> String {
    match baseline {
        Some(b) if b.description.is_empty() => format!(
            "# collbench check against baseline '{}': {}\n",
            b.name, b.source
        ),
        Some(b) => format!(
            "# collbench check against baseline '{}' ({}): {}\n",
            b.name, b.description, b.source
        ),
        None => "# collbench check WITHOUT a baseline: figures are not compared with expected ones, only ranks with each other (pass --baseline NAME|FILE; see `collbench baselines list`)\n".into(),
    }
}

/// The pairwise tests between ranks: the heatmap, then the findings.
fn rank_pairs(loc: &Localization) -> String {
    let mut out = String::from("#\n");
    out += &localize::heatmap_text(loc);
    for f in localize::findings(loc) {
        let _ = writeln!(out, "# {f}");
    }
    out
}

/// The host tests: the host-pair matrix, the findings, then each pair
/// test that failed (listed, not judged).
fn host_pairs(h: &HostReport) -> String {
    let mut out = String::from("#\n");
    for l in h.verdict.matrix.text(&h.hosts).lines() {
        let _ = writeln!(out, "# {l}");
    }
    if let Some(g) = &h.groups {
        let _ = writeln!(
            out,
            "# fabric groups: {} (within groups first, then across)",
            g.names.join(", ")
        );
    }
    if let Some(n) = &h.group_note {
        let _ = writeln!(out, "# {n}");
    }
    // Every pair that ran, those across a slow group link included (the
    // verdict's matrix leaves them out of the hosts' judgement).
    let every_pair = hosts::HostMatrix::from_results(&h.sendrecv, h.hosts.len());
    for l in every_pair
        .pair_table(&h.hosts, h.slow_cut(), h.size_bytes)
        .lines()
    {
        let _ = writeln!(out, "# {l}");
    }
    for f in hosts::finding_lines(&h.verdict, &h.hosts) {
        let _ = writeln!(out, "# {f}");
    }
    for f in &h.failures {
        let name = |x: usize| h.hosts.get(x).map_or("?", |i| i.name.as_str());
        let _ = writeln!(
            out,
            "# failed pair test {} <-> {} (round {}, not judged): {}",
            name(f.a),
            name(f.b),
            f.round + 1,
            f.failure
        );
    }
    out
}

/// `text` with the path, the gate and the variants before its last line,
/// which names them where they set the verdict.
pub(super) fn with_transport(text: String, t: Option<&TransportReport>, status: Status) -> String {
    let Some(t) = t else { return text };
    let body = text.trim_end_matches('\n');
    let (head, last) = body.rsplit_once('\n').unwrap_or(("", body));
    let mut last = last.to_string();
    let named = t.named_at(status);
    if status >= Status::Warn && !named.is_empty() {
        last += if last.ends_with(')') { ": " } else { ", " };
        last += &named.join(", ");
    }
    format!("{head}\n{}{last}\n", t.text())
}

/// The last line: the verdict, what it was judged against, and the lines
/// that gave it when it is not a pass.
fn last_line(lines: &[Line], baseline: Option<&Baseline>, status: Status) -> String {
    let failing: Vec<String> = lines
        .iter()
        .filter(|l| l.status == status && status >= Status::Warn)
        .map(|l| l.op.clone())
        .collect();
    let basis = match baseline {
        Some(b) => format!("baseline '{}'", b.name),
        None => "no baseline used: self-consistency only".into(),
    };
    if failing.is_empty() {
        format!("collbench check: {} ({basis})\n", status.label())
    } else {
        format!(
            "collbench check: {} ({basis}): {}\n",
            status.label(),
            failing.join(", ")
        )
    }
}
