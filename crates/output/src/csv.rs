//! CSV: one header line, one row per case and placement, and for a
//! partial run (Ctrl-C) a last line `# partial: WHY`. Then come the
//! columns that say what NCCL ran (`explain`; empty where it was not asked
//! or could not say), and last the row's ceiling and the part that sets
//! it (docs/ceiling.md; empty where the topology was unknown).

use crate::Exporter;
use collbench_core::Record;

/// Column names, in order.
pub const COLUMNS: [&str; 25] = [
    "op",
    "dtype",
    "redop",
    "root",
    "size_bytes",
    "count",
    "placement",
    "time_us",
    "algbw_gbps",
    "busbw_gbps",
    "wrong",
    "iterations",
    "mean_us",
    "min_us",
    "p50_us",
    "p99_us",
    "max_us",
    "stdev_us",
    "nccl_algo",
    "nccl_proto",
    "nccl_channels",
    "nccl_kernels",
    "busbw_overstated",
    "ceiling_gbps",
    "bottleneck",
];

/// CSV rows; fields never contain commas or quotes (names are identifiers).
pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn serialize(&self, record: &Record) -> Vec<u8> {
        let mut s = COLUMNS.join(",") + "\n";
        for r in &record.results {
            for (name, p) in r.placements() {
                let opt = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_default();
                let st = p.stats.as_ref();
                // What NCCL ran (`explain`); empty where nothing was asked.
                let ex = p.explain.as_deref();
                let text = |f: fn(&collbench_core::Explanation) -> String| {
                    ex.filter(|e| !e.kernels.is_empty())
                        .map(f)
                        .unwrap_or_default()
                };
                let fields = [
                    r.op.clone(),
                    r.dtype.clone(),
                    r.redop.clone(),
                    r.root.to_string(),
                    r.size_bytes.to_string(),
                    r.count.to_string(),
                    name.to_string(),
                    format!("{:.3}", p.time_us),
                    format!("{:.3}", p.algbw_gbps),
                    format!("{:.3}", p.busbw_gbps),
                    p.wrong.map(|w| w.to_string()).unwrap_or_default(),
                    p.iterations.to_string(),
                    opt(st.map(|s| s.mean_us)),
                    opt(st.map(|s| s.min_us)),
                    opt(st.map(|s| s.p50_us)),
                    opt(st.map(|s| s.p99_us)),
                    opt(st.map(|s| s.max_us)),
                    opt(st.map(|s| s.stdev_us)),
                    text(|e| e.algo_text()),
                    text(|e| e.proto_text()),
                    text(|e| e.channels_text()),
                    text(|e| e.kernels_text()),
                    ex.map(|e| e.busbw_overstated.to_string())
                        .unwrap_or_default(),
                    opt(p.ceiling.as_ref().map(|c| c.busbw_gbps)),
                    p.ceiling
                        .as_ref()
                        .map(|c| c.bottleneck.key().to_string())
                        .unwrap_or_default(),
                ];
                s += &fields.join(",");
                s.push('\n');
            }
        }
        // A stopped run says so in its last line, as every format does;
        // CSV has no comments, but `#` lines are skipped by the usual
        // readers (`pandas.read_csv(comment='#')`, R's `comment.char`).
        if let Some(why) = &record.partial {
            s += &format!("# partial: {why}\n");
        }
        s.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_run_says_so_in_its_last_line() {
        let mut record = Record::default();
        let whole = String::from_utf8(CsvExporter.serialize(&record)).unwrap();
        assert!(!whole.contains("partial"));
        record.partial = Some("interrupted by a signal after 0 rows".into());
        let text = String::from_utf8(CsvExporter.serialize(&record)).unwrap();
        assert_eq!(
            text.lines().last(),
            Some("# partial: interrupted by a signal after 0 rows")
        );
    }
}
