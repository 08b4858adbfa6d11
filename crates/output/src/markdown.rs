//! Markdown tables for tickets and pull requests.

use crate::units::fixed_width;
use crate::Exporter;
use collbench_core::Record;

/// One table per collective plus the summary.
pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn serialize(&self, record: &Record) -> Vec<u8> {
        let mut s = format!(
            "# collbench results\n\nBackend: {}; library: {}; ranks: {}\n\n",
            record.backend.as_deref().unwrap_or("?"),
            record.library.as_deref().unwrap_or("none"),
            record.settings.world_size
        );
        for op in record.ops() {
            s += &format!("## {op}\n\n");
            s += "| size (B) | count | type | redop | root | time (us) | algbw (GB/s) | busbw (GB/s) | #wrong | in-place time (us) | in-place busbw (GB/s) | in-place #wrong |\n";
            s += "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
            for r in record.op_results(&op) {
                let cell =
                    |p: Option<&collbench_core::Placement>,
                     f: &dyn Fn(&collbench_core::Placement) -> String| {
                        p.map(f).unwrap_or_else(|| "N/A".into())
                    };
                let wrong = |p: &collbench_core::Placement| {
                    p.wrong
                        .map(|w| w.to_string())
                        .unwrap_or_else(|| "N/A".into())
                };
                let (o, i) = (r.out_of_place.as_ref(), r.in_place.as_ref());
                s += &format!(
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                    r.size_bytes,
                    r.count,
                    r.dtype,
                    r.redop,
                    r.root,
                    cell(o, &|p| fixed_width(p.time_us, 7).trim().to_string()),
                    cell(o, &|p| format!("{:.2}", p.algbw_gbps)),
                    cell(o, &|p| format!("{:.2}", p.busbw_gbps)),
                    cell(o, &wrong),
                    cell(i, &|p| fixed_width(p.time_us, 7).trim().to_string()),
                    cell(i, &|p| format!("{:.2}", p.busbw_gbps)),
                    cell(i, &wrong),
                );
            }
            s.push('\n');
        }
        s += "## Summary\n\n| collective | type | busbw at largest (GB/s) | largest (B) | peak busbw (GB/s) | time at smallest (us) | #wrong |\n|---|---|---:|---:|---:|---:|---:|\n";
        for sm in record.summaries() {
            s += &format!(
                "| {} | {} | {:.2} | {} | {:.2} | {:.2} | {} |\n",
                sm.op,
                sm.dtype,
                sm.busbw_at_largest_gbps,
                sm.largest_bytes,
                sm.peak_busbw_gbps,
                sm.time_at_smallest_us,
                sm.wrong
            );
        }
        s.into_bytes()
    }
}
