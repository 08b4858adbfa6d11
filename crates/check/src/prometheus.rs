//! node_exporter textfile-collector metrics for a check, written
//! atomically: node_exporter may read the folder at any moment and must
//! never see half a file.

use crate::error::CheckError;
use crate::host_tests::HostReport;
use crate::verdict::{Fractions, Line, Metric, Status};
use std::io::Write;
use std::path::Path;

/// The metrics as Prometheus text exposition format.
pub fn render(lines: &[Line], overall: Status, timestamp_s: u64) -> String {
    let mut out = String::new();
    for (metric, name, help) in [
        (
            Metric::BusbwGbps,
            "collbench_busbw_gbps",
            "Bus bandwidth measured by collbench check, GB/s (out-of-place).",
        ),
        (
            Metric::TimeUs,
            "collbench_time_us",
            "Time per operation at a small size, microseconds.",
        ),
    ] {
        out += &format!("# HELP {name} {help}\n# TYPE {name} gauge\n");
        for l in lines.iter().filter(|l| l.metric == metric) {
            if let Some(v) = l.measured {
                out += &format!(
                    "{name}{{op=\"{}\",size_bytes=\"{}\"}} {v}\n",
                    l.op, l.size_bytes
                );
            }
        }
    }
    out += "# HELP collbench_verdict Verdict per op: 0 pass, 1 warn, 2 fail, 6 incomplete (not judged) (worst line of the op).\n";
    out += "# TYPE collbench_verdict gauge\n";
    let mut ops: Vec<&str> = Vec::new();
    for l in lines {
        if !ops.contains(&l.op.as_str()) {
            ops.push(&l.op);
        }
    }
    for op in ops {
        let worst = lines
            .iter()
            .filter(|l| l.op == op)
            .map(|l| l.status)
            .max()
            .unwrap_or(Status::Pass);
        out += &format!("collbench_verdict{{op=\"{op}\"}} {}\n", worst.exit_code());
    }
    out += "# HELP collbench_check_status Overall verdict of the last check: 0 pass, 1 warn, 2 fail, 6 incomplete (part of the job not judged).\n";
    out += "# TYPE collbench_check_status gauge\n";
    out += &format!("collbench_check_status {}\n", overall.exit_code());
    // Its own gauge too, so that an alert on partial evidence needs no
    // knowledge of the codes.
    out += "# HELP collbench_check_incomplete 1 when part of the last check's job could not be judged (its verdict is INCOMPLETE), else 0.\n";
    out += "# TYPE collbench_check_incomplete gauge\n";
    out += &format!(
        "collbench_check_incomplete {}\n",
        u8::from(overall == Status::Incomplete)
    );
    out += "# HELP collbench_check_timestamp_seconds When the last check finished, Unix time.\n";
    out += "# TYPE collbench_check_timestamp_seconds gauge\n";
    out += &format!("collbench_check_timestamp_seconds {timestamp_s}\n");
    out
}

/// Per-host metrics of the host tests (a multi-process check): each
/// host's score (its fastest pair over the job median) and its verdict,
/// labelled with its name and ranks, so an alert can name the node.
pub fn render_hosts(h: &HostReport, f: Fractions) -> String {
    let mut out = String::new();
    out += "# HELP collbench_host_score Host's fastest host-pair busbw over the job median (1 = typical).\n";
    out += "# TYPE collbench_host_score gauge\n";
    let label = |host: usize| {
        let info = &h.hosts[host];
        format!(
            "host=\"{}\",ranks=\"{}-{}\"",
            info.name,
            info.ranks.start,
            info.ranks.end.saturating_sub(1)
        )
    };
    for s in &h.verdict.matrix.hosts {
        if let (Some(score), true) = (s.score, s.host < h.hosts.len()) {
            out += &format!("collbench_host_score{{{}}} {score}\n", label(s.host));
        }
    }
    out += "# HELP collbench_host_verdict Host verdict of the host tests: 0 pass, 1 warn (suspect), 2 fail, 6 not judged (no pair test of its ran).\n";
    out += "# TYPE collbench_host_verdict gauge\n";
    let unjudged = h.unjudged_hosts();
    for host in 0..h.hosts.len() {
        let not_judged = unjudged.contains(&host).then_some(Status::Incomplete);
        let worst = h
            .verdict
            .findings
            .iter()
            .filter(|x| x.host() == Some(host))
            .map(|x| x.status(f))
            .chain(not_judged)
            .max()
            .unwrap_or(Status::Pass)
            .max(Status::Pass);
        out += &format!(
            "collbench_host_verdict{{{}}} {}\n",
            label(host),
            worst.exit_code()
        );
    }
    out
}

/// Writes `text` to `path` through a temporary file in the same folder
/// and a rename (atomic on one file system). The rename replaces whatever
/// the name is, so only a regular file (or none) is replaced: a symlink, a
/// FIFO or a device there (`/dev/full` became a regular file as root) is
/// refused, checked again here because a check runs for minutes after the
/// CLI first looked.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), CheckError> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.is_file() {
            return Err(CheckError::MetricsNotAFile {
                path: path.to_path_buf(),
                what: if meta.file_type().is_symlink() {
                    "a symbolic link"
                } else {
                    "a FIFO, device, socket or folder"
                },
            });
        }
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| CheckError::MetricsNoFileName {
            path: path.to_path_buf(),
        })?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let fail = |error: std::io::Error| CheckError::MetricsUnwritable {
        path: path.to_path_buf(),
        error,
    };
    let mut f = std::fs::File::create(&tmp).map_err(fail)?;
    f.write_all(text.as_bytes()).map_err(fail)?;
    f.sync_all().map_err(fail)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::battery::Measured;
    use crate::verdict::judge_busbw;

    #[test]
    fn metrics_have_help_type_and_labels() {
        let m = Measured {
            op: "all_reduce".into(),
            dtype: "float".into(),
            size_bytes: 4096,
            busbw_gbps: 12.5,
            busbw_in_place_gbps: 12.0,
            time_us: 3.0,
            wrong: 0,
            explain: None,
            arrival: None,
            nccl_path: None,
        };
        let f = Fractions {
            warn: 0.9,
            fail: 0.75,
        };
        let lines = [judge_busbw(&m, Some(20.0), f)];
        let text = render(&lines, Status::Fail, 1_700_000_000);
        assert!(text.contains("collbench_busbw_gbps{op=\"all_reduce\",size_bytes=\"4096\"} 12.5\n"));
        assert!(text.contains("collbench_verdict{op=\"all_reduce\"} 2\n"));
        assert!(text.contains("collbench_check_status 2\n"));
        assert!(text.contains("collbench_check_incomplete 0\n"));
        let partial = render(&lines, Status::Incomplete, 1_700_000_000);
        assert!(partial.contains("collbench_check_status 6\n"), "{partial}");
        assert!(
            partial.contains("collbench_check_incomplete 1\n"),
            "{partial}"
        );
        assert!(text.contains("collbench_check_timestamp_seconds 1700000000\n"));
        for name in [
            "collbench_busbw_gbps",
            "collbench_verdict",
            "collbench_check_status",
            "collbench_check_incomplete",
            "collbench_check_timestamp_seconds",
        ] {
            assert!(text.contains(&format!("# HELP {name} ")), "{name}");
            assert!(text.contains(&format!("# TYPE {name} gauge\n")), "{name}");
        }
    }

    #[test]
    fn atomic_write_leaves_only_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("collbench.prom");
        write_atomic(&p, "a 1\n").unwrap();
        write_atomic(&p, "a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a 2\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn atomic_write_replaces_only_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "keep\n").unwrap();
        let link = dir.path().join("link.prom");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = write_atomic(&link, "a 1\n").unwrap_err().to_string();
        assert!(e.contains("a symbolic link"), "{e}");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep\n");
        assert!(write_atomic(Path::new("/dev/null"), "a 1\n").is_err());
    }
}
