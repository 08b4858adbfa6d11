//! nccl-tests' text layout, byte for byte where nccl-tests defines it, so
//! the regex parsers people already run on nccl-tests logs read ours.
//!
//! The pieces are separate functions because a run prints them as it goes:
//! [`preamble`] and [`table_header`] before a collective's first row,
//! [`row`] per size, [`footer`] after the last, and [`summary`] once at the
//! end of a multi-collective run.

pub mod arrival;
mod explain;
pub mod memory;
pub mod per_iter;

pub use explain::footnotes as explain_footnotes;

use crate::units::{c_g, fixed_width};
use crate::Exporter;
use collbench_core::adaptive::StopReason;
use collbench_core::extension::{HeaderWords, PlacementExtension};
use collbench_core::extension_list::extensions;
use collbench_core::extension_list::Active;
use collbench_core::{AutoPrecision, CaseResult, Placement, Record};

/// Text layout switches (`-C`, `-S`, `--explain`, `-I`, placement
/// extensions).
#[derive(Debug, Clone, Copy, Default)]
pub struct TextOptions {
    /// Time column is CPU-side time (`-C 1`).
    pub cputime: bool,
    /// Rows end with a timestamp (`-S 1`).
    pub timestamps: bool,
    /// Columns after nccl-tests' own with NCCL's algorithm, protocol and
    /// channels per placement, and footnotes (`--explain`).
    pub explain: bool,
    /// Per-iteration timing (`-I 1`): `Some(skip)` adds nccl-tests'
    /// i_min i_max i_p99 i_cv% after each placement, summarising the
    /// iterations after the first `skip` (`-K`).
    pub per_iter: Option<u32>,
    /// The placement extensions on (`collbench_core::extension`): their
    /// cell after each placement's #wrong.
    pub extensions: Active,
}

impl TextOptions {
    /// `-I`, `-K` and the placement extensions as a record's settings
    /// give them.
    pub fn with_per_iter_of(mut self, record: &Record) -> TextOptions {
        let st = &record.settings;
        self.per_iter = st.per_iter_timing.then_some(st.per_iter_skip as u32);
        self.extensions = Active::of(st);
        self
    }
}

/// The program name nccl-tests would print for `op` (`all_reduce_perf`).
pub fn program_name(op: &str) -> String {
    format!("{op}_perf")
}

/// Lines before a collective's table. `first` adds the version line and
/// the devices, which a multi-collective run prints once.
pub fn preamble(record: &Record, op: &str, first: bool) -> String {
    let mut s = String::new();
    let st = &record.settings;
    if first {
        let lib = record.library.as_deref().unwrap_or("none");
        s += &format!(
            "# collbench version {} (nccl-tests 2.19 output format) backend: {} library: {}\n",
            record.tool_version.as_deref().unwrap_or("?"),
            record.backend.as_deref().unwrap_or("?"),
            lib
        );
    }
    s += &format!("# Collective test starting: {}\n", program_name(op));
    let (step, kind) = match (st.step_factor, st.step_bytes) {
        (Some(f), _) => (f, "factor"),
        (None, Some(b)) => (b, "bytes"),
        (None, None) => (0, "bytes"),
    };
    s += &format!(
        "# nThread {} nGpus {} minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} agg iters: {} validation: {} graph: {} unalign: {}\n",
        st.threads_per_process.max(1),
        st.gpus_per_thread.max(1),
        st.min_bytes,
        st.max_bytes,
        step,
        kind,
        st.warmup_iters,
        // 0 is `-n auto` (-n 0 is refused): rows took varying counts.
        if st.iters == 0 {
            "auto".to_string()
        } else {
            st.iters.to_string()
        },
        st.agg_iters,
        st.check as u8,
        st.graph,
        st.unalign
    );
    if st.per_iter_timing {
        s += &per_iter::report_line(st.per_iter_skip);
    }
    for ext in extensions() {
        s += &ext.report_line(st);
    }
    if first {
        s += "# Sizes are rounded down to whole elements, and to 16-byte chunks per rank where a buffer is split between ranks (as nccl-tests does)\n";
        s += "#\n# Using devices\n";
        for d in &record.devices {
            let host: &str = d.host.split('.').next().unwrap_or(&d.host);
            s += &format!(
                "#  Rank {:2} Group {:2} Pid {:6} on {:>10} device {:2} [{}] {}\n",
                d.rank,
                d.group,
                d.pid,
                host,
                d.device,
                d.bus_id.as_deref().unwrap_or("cpu"),
                d.name
            );
        }
    }
    s
}

/// The `#` line and the three column-header lines.
pub fn table_header(opts: TextOptions) -> String {
    let time = if opts.cputime { "cputime" } else { "time" };
    let (pad, label, fmt) = if opts.timestamps {
        (19, "timestamp", "%Y-%m-%d %H:%M:%S")
    } else {
        (0, "", "")
    };
    let mut s = String::from("#\n");
    if !opts.extensions.is_empty() || opts.per_iter.is_some() {
        // An extension's header carries `-I`'s columns too.
        s += &match opts.extensions.iter().next() {
            None => per_iter::header(time, pad, label, fmt),
            Some(ext) => ext.table_header(
                HeaderWords {
                    time,
                    pad,
                    label,
                    format: fmt,
                },
                opts.per_iter.is_some(),
            ),
        };
        return if opts.explain {
            explain::header(&s, opts)
        } else {
            s
        };
    }
    s += &format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          \n",
        "", "", "", "", ""
    );
    s += &format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} {:>pad$}\n",
        "size", "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw", "busbw", "#wrong", label
    );
    s += &format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} {:>pad$}\n",
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", fmt
    );
    if opts.explain {
        return explain::header(&s, opts);
    }
    s
}

fn half_row(p: Option<&Placement>) -> String {
    match p {
        None => format!("  {:>7}  {:>6}  {:>6}    N/A", "N/A", "N/A", "N/A"),
        Some(p) => {
            let mut s = format!(
                "  {}  {}  {}",
                fixed_width(p.time_us, 7),
                fixed_width(p.algbw_gbps, 6),
                fixed_width(p.busbw_gbps, 6)
            );
            match p.wrong {
                Some(w) => s += &format!("  {:>6}", c_g(w as f64)),
                None => s += "    N/A",
            }
            s
        }
    }
}

/// One result row; `timestamp` is printed when `-S` asked for it.
pub fn row(r: &CaseResult, timestamp: Option<&str>) -> String {
    let mut s = format!(
        "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}",
        r.size_bytes, r.count, r.dtype, r.redop, r.root
    );
    s += &half_row(r.out_of_place.as_ref());
    s += &half_row(r.in_place.as_ref());
    if let Some(ts) = timestamp {
        s += &format!("{ts:>21}");
    }
    s.push('\n');
    s
}

/// One result row as `opts` lays it out: [`row`], with the placement
/// extensions' and `-I`'s cells after each placement, plus the explain
/// columns with `--explain`; under it, the extensions' lines.
pub fn row_with(r: &CaseResult, timestamp: Option<&str>, opts: TextOptions) -> String {
    let mut s = match (opts.per_iter, opts.extensions) {
        (None, on) if on.is_empty() => row(r, timestamp),
        (per_iter, on) => {
            let mut s = format!(
                "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}",
                r.size_bytes, r.count, r.dtype, r.redop, r.root
            );
            for p in [r.out_of_place.as_ref(), r.in_place.as_ref()] {
                s += &half_row(p);
                for ext in on.iter() {
                    s += &extension_cell(ext, p);
                }
                if let Some(skip) = per_iter {
                    s += &per_iter::cells(p, skip);
                }
            }
            if let Some(ts) = timestamp {
                s += &format!("{ts:>21}");
            }
            s + "\n"
        }
    };
    if opts.explain {
        s.pop();
        s += &explain::row_cells(r);
        s.push('\n');
    }
    for ext in extensions() {
        s += &ext.row_lines(r);
    }
    s
}

/// A placement extension's cell (its count as `%g`; `N/A` where the
/// placement was not checked).
pub fn extension_cell(ext: &dyn PlacementExtension, p: Option<&Placement>) -> String {
    let w = ext.cell_width();
    match ext.cell(p) {
        Some(v) => format!("  {:>w$}", c_g(v as f64)),
        None => format!("  {:>w$}", "N/A"),
    }
}

/// The footer's line of each placement extension that checked a row of
/// `rows` (after `Out of bounds values`), as nccl-tests prints its own.
pub fn extension_footer(rows: &[CaseResult]) -> String {
    let mut s = String::new();
    for ext in extensions() {
        if let Some(n) = ext.failures(rows) {
            s += &format!(
                "# {:<20} : {} {}\n",
                ext.footer_label(),
                n,
                if n > 0 { "FAILED" } else { "OK" }
            );
        }
    }
    s
}

/// The straggler question: the `k` slowest ranks of a row, per placement,
/// as a comment line (`--per-rank`). Empty when the row has no per-rank
/// times.
pub fn per_rank(r: &CaseResult, devices: &[collbench_core::DeviceInfo], k: usize) -> String {
    let mut s = String::new();
    for (name, p) in r.placements() {
        if p.rank_time_us.len() < 2 {
            continue;
        }
        let mut ranks: Vec<(usize, f64)> = p.rank_time_us.iter().copied().enumerate().collect();
        ranks.sort_by(|a, b| b.1.total_cmp(&a.1));
        let median = {
            let mut t: Vec<f64> = p.rank_time_us.clone();
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        };
        let list: Vec<String> = ranks
            .iter()
            .take(k)
            .map(|(rank, t)| {
                let host = devices
                    .iter()
                    .find(|d| d.rank == *rank as u64)
                    .map(|d| d.host.as_str())
                    .unwrap_or("?");
                format!("rank {rank} ({host}) {t:.2} us")
            })
            .collect();
        s += &format!(
            "#   {:>12} {:<12} slowest: {} (median {median:.2} us)\n",
            r.size_bytes,
            name,
            list.join(", ")
        );
    }
    s
}

/// Half-rows with at least one wrong element (nccl-tests' "Out of bounds
/// values" counts these).
pub fn out_of_bounds(rows: &[CaseResult]) -> u64 {
    rows.iter()
        .flat_map(|r| r.placements())
        .filter(|(_, p)| p.wrong.unwrap_or(0) > 0)
        .count() as u64
}

/// Under `-n auto`, a line for the placements whose repeats stopped
/// before their interval was as tight as the rule asks (the placement's
/// time cap or the most repeats): how many, and the widest, so a reader
/// knows which rows to measure again with a fixed `-n`.
pub fn auto_note(rows: &[CaseResult]) -> Option<String> {
    let series: Vec<(u64, AutoPrecision)> = rows
        .iter()
        .flat_map(|r| {
            r.placements()
                .filter_map(move |(_, p)| p.auto.map(|a| (r.size_bytes, a)))
        })
        .collect();
    // One repeat says nothing of its spread: the widest of all.
    let width = |a: &AutoPrecision| a.rel_half_width.unwrap_or(f64::INFINITY);
    let short: Vec<&(u64, AutoPrecision)> = series
        .iter()
        .filter(|(_, a)| a.stopped != StopReason::Tight)
        .collect();
    let (size, widest) = short
        .iter()
        .max_by(|x, y| width(&x.1).total_cmp(&width(&y.1)))?;
    let width = match widest.rel_half_width {
        Some(w) => format!("+-{:.1}%", w * 100.0),
        None => "unknown, one repeat".to_string(),
    };
    Some(format!(
        "# -n auto: {} of {} placements stopped before their time was pinned (widest {width} at {size} B): run those sizes with a fixed -n to pin them\n",
        short.len(),
        series.len(),
    ))
}

/// The closing lines of a collective's block.
pub fn footer(op: &str, rows: &[CaseResult]) -> String {
    footer_with_memory(op, rows, None)
}

/// [`footer`], with `-M 1`'s memory line before the last `#` as
/// nccl-tests prints it.
pub fn footer_with_memory(
    op: &str,
    rows: &[CaseResult],
    mem: Option<&memory::GpuMemory>,
) -> String {
    let oob = out_of_bounds(rows);
    let mut s = format!(
        "# {:<20} : {} {}\n",
        "Out of bounds values",
        oob,
        if oob > 0 { "FAILED" } else { "OK" }
    );
    s += &extension_footer(rows);
    s += &format!(
        "# {:<20} : {} \n",
        "Avg bus bandwidth",
        c_g(collbench_core::record::avg_busbw(rows))
    );
    if let Some(note) = auto_note(rows) {
        s += &note;
    }
    s += "#\n";
    s += &format!("# Collective test concluded: {}\n", program_name(op));
    if let Some(m) = mem {
        s += &memory::line(m);
    }
    s += "#\n";
    s
}

/// The table that ends a multi-collective run: per collective and type,
/// busbw at the largest size, the peak, time at the smallest size and
/// wrong elements (out-of-place figures).
pub fn summary(record: &Record) -> String {
    let mut s = String::from("# Summary (out-of-place)\n");
    s += &format!(
        "# {:>14}  {:>8}  {:>12}  {:>13}  {:>12}  {:>10}  {:>12}  {:>13}  {:>6}\n",
        "collective",
        "type",
        "largest (B)",
        "busbw (GB/s)",
        "peak (GB/s)",
        "at (B)",
        "smallest (B)",
        "time (us)",
        "#wrong"
    );
    for sm in record.summaries() {
        s += &format!(
            "# {:>14}  {:>8}  {:>12}  {:>13.2}  {:>12.2}  {:>10}  {:>12}  {:>13.2}  {:>6}\n",
            sm.op,
            sm.dtype,
            sm.largest_bytes,
            sm.busbw_at_largest_gbps,
            sm.peak_busbw_gbps,
            sm.peak_at_bytes,
            sm.smallest_bytes,
            sm.time_at_smallest_us,
            sm.wrong
        );
    }
    s += "#\n";
    s
}

/// A whole record as text, as a run would have printed it.
#[derive(Default)]
pub struct TextExporter {
    pub options: TextOptions,
}

impl Exporter for TextExporter {
    fn serialize(&self, record: &Record) -> Vec<u8> {
        let mut s = String::new();
        let options = self.options.with_per_iter_of(record);
        let ops = record.ops();
        for (i, op) in ops.iter().enumerate() {
            let rows: Vec<CaseResult> = record.op_results(op).cloned().collect();
            s += &preamble(record, op, i == 0);
            s += &table_header(options);
            for r in &rows {
                s += &row_with(r, None, options);
            }
            if options.explain {
                s += &explain_footnotes(&rows);
            }
            s += &footer(op, &rows);
        }
        if ops.len() > 1 {
            s += &summary(record);
        }
        // A stopped run says so where a reader of the log looks last.
        if let Some(why) = &record.partial {
            s += &format!("# collbench: partial: {why}\n");
        }
        s.push('\n');
        s.into_bytes()
    }
}

#[cfg(test)]
mod auto_note_tests {
    use super::*;

    fn row(size_bytes: u64, auto: [Option<AutoPrecision>; 2]) -> CaseResult {
        let placement = |auto| {
            Some(Placement {
                auto,
                ..Placement::default()
            })
        };
        CaseResult {
            op: "all_reduce".into(),
            size_bytes,
            out_of_place: placement(auto[0]),
            in_place: placement(auto[1]),
            ..CaseResult::default()
        }
    }

    fn stopped(stopped: StopReason, repeats: u32, width: Option<f64>) -> Option<AutoPrecision> {
        Some(AutoPrecision {
            repeats,
            rel_half_width: width,
            stopped,
        })
    }

    #[test]
    fn pinned_or_fixed_rows_say_nothing() {
        let tight = stopped(StopReason::Tight, 3, Some(0.004));
        assert_eq!(auto_note(&[row(8, [tight, tight])]), None);
        assert_eq!(auto_note(&[row(8, [None, None])]), None);
    }

    #[test]
    fn rows_cut_short_are_counted_and_the_widest_named() {
        let rows = [
            row(8, [stopped(StopReason::Tight, 3, Some(0.004)); 2]),
            row(
                1 << 27,
                [
                    stopped(StopReason::Budget, 4, Some(0.031)),
                    stopped(StopReason::MaxSamples, 20, Some(0.012)),
                ],
            ),
            row(1 << 30, [stopped(StopReason::Budget, 2, Some(0.062)), None]),
        ];
        assert_eq!(
            auto_note(&rows).unwrap(),
            "# -n auto: 3 of 5 placements stopped before their time was pinned (widest +-6.2% at 1073741824 B): run those sizes with a fixed -n to pin them\n"
        );
        // One repeat says nothing of its spread: it is the widest.
        let one = [row(1 << 30, [stopped(StopReason::Budget, 1, None), None])];
        assert!(auto_note(&one)
            .unwrap()
            .contains("widest unknown, one repeat at 1073741824 B"));
    }

    #[test]
    fn the_note_closes_the_block_before_its_last_lines() {
        let rows = [row(8, [stopped(StopReason::Budget, 2, Some(0.02)), None])];
        let f = footer("all_reduce", &rows);
        let lines: Vec<&str> = f.lines().collect();
        assert!(lines[2].starts_with("# -n auto: 1 of 1 placements"), "{f}");
        assert_eq!(lines[3], "#");
    }
}
