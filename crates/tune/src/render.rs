//! Writers for a [`TuneReport`]: the aligned text table, Markdown, JSON and
//! the shell lines of a uniform setting. (The tuner CSV is in
//! [`crate::tuner_csv`].)
//!
//! "gain" in the tables is the busbw gain,
//! `default time / candidate time - 1`, with its 95% interval from the
//! confirmation pairs, so the numbers read like nccl-tests' busbw columns.

use crate::plan::{Plan, PlanRow};
use crate::report::{
    process_wide_choice, winners, BandReport, CandidateStatus, End, Outcome, ProcessWideFigure,
    TuneReport, Win,
};
use crate::setting::{CtaPolicy, Registration, Setting, TunerAxis};
use crate::stats::{Interval, Verdict};
use collbench_core::size::format_size;

const HEADER: [&str; 8] = [
    "op",
    "size",
    "band",
    "default us",
    "busbw",
    "best",
    "gain [95% CI]",
    "busbw / cost",
];

/// The band as `[from, to)` (`[from, to]` for the last band, which ends
/// at the largest size swept).
fn band_text(b: &BandReport, last: bool) -> String {
    if last {
        format!("[{}, {}]", human(b.band.min_bytes), human(b.band.max_bytes))
    } else {
        format!(
            "[{}, {})",
            human(b.band.min_bytes),
            human(b.band.max_bytes + 1)
        )
    }
}

/// A size the short way when it is a whole unit (`512M`), else with one
/// decimal (`362.0M`).
fn human(bytes: u64) -> String {
    for (shift, suffix) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        let unit = 1u64 << shift;
        if bytes >= unit {
            if bytes.is_multiple_of(unit) {
                return format_size(bytes);
            }
            return format!("{:.1}{suffix}", bytes as f64 / unit as f64);
        }
    }
    bytes.to_string()
}

/// busbw gain in percent from a time ratio interval: (estimate, lo, hi).
fn busbw_gain_pct(r: &Interval) -> (f64, f64, f64) {
    (
        (1.0 / r.estimate - 1.0) * 100.0,
        (1.0 / r.hi - 1.0) * 100.0,
        (1.0 / r.lo - 1.0) * 100.0,
    )
}

fn gain_text(r: &Interval) -> String {
    let (g, lo, hi) = busbw_gain_pct(r);
    format!("{g:+.1}% [{lo:+.1}, {hi:+.1}]")
}

fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".to_string(), |v| format!("{v:.digits$}"))
}

/// The cells of one band's row.
fn row(b: &BandReport, last: bool) -> [String; 8] {
    let band = band_text(b, last);
    let (best, gain, after) = match &b.outcome {
        Outcome::Gain {
            setting,
            ratio,
            busbw_gbps,
            cost,
            ..
        } => (
            setting.to_string(),
            gain_text(ratio),
            format!("{} / {cost}", opt(*busbw_gbps, 2)),
        ),
        Outcome::NoGain { best, ratio } => {
            let tried = match (best, ratio) {
                (Some(s), Some(r)) => format!("{} ({s})", gain_text(r)),
                (Some(s), None) => format!("({s} screened only)"),
                _ => "-".to_string(),
            };
            ("no gain".to_string(), tried, "-".to_string())
        }
        Outcome::Incomplete => ("incomplete".to_string(), "-".to_string(), "-".to_string()),
    };
    [
        b.band.op.name().to_string(),
        human(b.band.probe_bytes),
        band,
        opt(b.default_time_us, 2),
        opt(b.default_busbw_gbps, 2),
        best,
        gain,
        after,
    ]
}

/// Whether band `i` is its op's last (it ends at the largest size swept).
fn is_last(r: &TuneReport, i: usize) -> bool {
    r.bands
        .get(i + 1)
        .is_none_or(|next| next.band.op != r.bands[i].band.op)
}

/// A closing line saying how the search ended and what it cost.
fn footer(r: &TuneReport) -> String {
    let incomplete = r
        .bands
        .iter()
        .filter(|b| b.outcome == Outcome::Incomplete)
        .count();
    let how = match &r.end {
        End::Complete if incomplete > 0 => format!(
            "complete, but {incomplete} of {} bands incomplete: their budget share ran out before any candidate was measured (raise --budget)",
            r.bands.len()
        ),
        End::Complete => "complete".to_string(),
        End::Interrupted => "interrupted: bands so far shown".to_string(),
        End::Failed(e) => format!("stopped by a failed measurement ({e}): bands so far shown"),
    };
    let limit = r
        .max_channels
        .map_or(String::new(), |n| format!(", at most {n} channels"));
    let lost = r.process_wide.as_ref().filter(|p| !p.bands.is_empty());
    let mut process_wide = lost.map_or(String::new(), |p| {
        format!(
            ", {:.1} s of it measuring {} (the shell lines' setting) in the {} band{} it did not win",
            p.spent_us / 1e6,
            p.setting,
            p.bands.len(),
            if p.bands.len() == 1 { "" } else { "s" }
        )
    });
    if let Some(p) = r.process_wide.as_ref().filter(|p| p.refine_spent_us > 0.0) {
        process_wide += &format!(
            ", {:.1} s on more fresh process pairs for {}'s figures, widest interval first (the budget the search had left)",
            p.refine_spent_us / 1e6,
            if lost.is_some() { "that setting" } else { "the shell lines' setting" }
        );
    }
    format!(
        "{how}; measured {:.1} s of a {:.1} s budget{limit}{process_wide}; a gain is shown when the whole 95% interval of the time ratio (fresh interleaved pairs) means >= {:.0}% less time{}{}",
        r.spent_us / 1e6,
        r.budget_us / 1e6,
        r.gain_rule.min_gain * 100.0,
        if env_in_children(r) {
            "; NCCL_* environment candidates were measured in child processes, each against a default-environment child of its own"
        } else {
            ""
        },
        process_pairs(&r.bands).map_or(String::new(), |n| {
            format!(", and a winner among them confirmed over {n} fresh pairs of such processes (its interval carries the spread from one process to the next)")
        })
    )
}

/// How many fresh process pairs the gains of `bands` were confirmed over
/// (`4`, or `3-4` where they differ), counting those spread over more than
/// one (an environment winner's); None without such a gain.
fn process_pairs<'b>(bands: impl IntoIterator<Item = &'b BandReport>) -> Option<String> {
    let counts: Vec<u32> = bands
        .into_iter()
        .filter_map(|b| match &b.outcome {
            Outcome::Gain { processes, .. } if *processes > 1 => Some(*processes),
            _ => None,
        })
        .collect();
    let (lo, hi) = (counts.iter().min()?, counts.iter().max()?);
    Some(if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}-{hi}")
    })
}

/// Whether any environment candidate was measured (in child processes:
/// `crate::child`).
fn env_in_children(r: &TuneReport) -> bool {
    r.bands.iter().flat_map(|b| &b.candidates).any(|c| {
        !c.setting.env.is_empty()
            && matches!(
                c.status,
                CandidateStatus::Screened { .. } | CandidateStatus::Pruned { .. }
            )
    })
}

/// The aligned text table (columns padded to their widest cell).
pub fn text(r: &TuneReport) -> String {
    let rows: Vec<Vec<String>> = std::iter::once(HEADER.map(String::from))
        .chain(
            r.bands
                .iter()
                .enumerate()
                .map(|(i, b)| row(b, is_last(r, i))),
        )
        .map(Vec::from)
        .collect();
    let mut out = aligned(&rows);
    out.push_str(&footer(r));
    out.push('\n');
    out.push_str(&replaced_lines(r));
    out.push_str(&failed_lines(r));
    out
}

/// One line per band whose own pick gave way to the process-wide setting
/// (`crate::report::Replaced`): the table names the better one, and the
/// pick it replaced must still be on record.
fn replaced_lines(r: &TuneReport) -> String {
    let mut out = String::new();
    for b in &r.bands {
        let (Some(x), Some((setting, ratio))) = (&b.replaced, b.gain()) else {
            continue;
        };
        let pick = match (&x.setting, &x.ratio) {
            (Some(s), Some(i)) if x.was_gain => format!("its own pick {s} ({})", gain_text(i)),
            (Some(s), Some(i)) => format!("its own pick {s} (no gain: {})", gain_text(i)),
            (Some(s), None) => format!("its own pick {s} (screened only)"),
            (None, _) => "no pick of its own".to_string(),
        };
        out.push_str(&format!(
            "replaced: {} {}: {pick} gave way to {setting} ({}), the shell lines' setting, measured after the band on fresh pairs and faster over its whole interval\n",
            b.band.op.name(),
            human(b.band.probe_bytes),
            gain_text(ratio)
        ));
    }
    out
}

/// One line per candidate that failed (its child processes, under a
/// launcher), with the first band's reason: the table shows only winners,
/// and a candidate that never got measured must say why.
fn failed_lines(r: &TuneReport) -> String {
    let mut seen: Vec<&Setting> = Vec::new();
    let mut out = String::new();
    for c in r.bands.iter().flat_map(|b| &b.candidates) {
        if let CandidateStatus::Failed { reason } = &c.status {
            if !seen.contains(&&c.setting) {
                seen.push(&c.setting);
                out.push_str(&format!("failed: {}: {reason}\n", c.setting));
            }
        }
    }
    out
}

/// Rows with each column padded to its widest cell, two spaces apart.
fn aligned(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .map(|x| x.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for x in rows {
        let cells: Vec<String> = x
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// `--list-candidates`: the job, then one row per candidate (knob, values,
/// ops, where it is measured, why it applies), then the counts.
pub fn plan(p: &Plan, rows: &[PlanRow]) -> String {
    let job = &p.job;
    let mut out = format!(
        "# collbench tune: {} host(s), {} ranks; between hosts: {} ({})\n",
        job.hosts, job.ranks, job.transport.transport, job.transport.why
    );
    let header = ["knob", "values", "ops", "measured", "why"].map(String::from);
    let table: Vec<Vec<String>> = std::iter::once(Vec::from(header))
        .chain(rows.iter().map(plan_row))
        .collect();
    out.push_str(&aligned(&table));
    let count = |f: &dyn Fn(&PlanRow) -> bool| rows.iter().filter(|r| f(r)).count();
    out.push_str(&format!(
        "# {} candidates: {} in process, {} in child processes (NCCL reads them from its environment), {} not measured\n",
        rows.len(),
        count(&|r| r.measured && !r.in_child),
        count(&|r| r.measured && r.in_child),
        count(&|r| !r.measured),
    ));
    out
}

fn plan_row(r: &PlanRow) -> Vec<String> {
    let values = if r.setting.env.is_empty() {
        r.setting.to_string()
    } else {
        let vars: Vec<String> = r
            .setting
            .env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        vars.join(" ")
    };
    let ops: Vec<&str> = r.ops.iter().map(|o| o.name()).collect();
    let measured = match (r.measured, r.in_child) {
        (false, _) => "no",
        (true, false) => "in process",
        (true, true) => "in children",
    };
    vec![
        r.knob.name().to_string(),
        values,
        ops.join(","),
        measured.to_string(),
        r.why.clone(),
    ]
}

/// The table as Markdown.
pub fn markdown(r: &TuneReport) -> String {
    let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
    let mut out = line(&HEADER.map(String::from));
    out.push_str(&line(&[" --- "; 8].map(|s| s.trim().to_string())));
    for (i, b) in r.bands.iter().enumerate() {
        out.push_str(&line(&row(b, is_last(r, i))));
    }
    out.push('\n');
    out.push_str(&footer(r));
    out.push('\n');
    for line in replaced_lines(r).lines().chain(failed_lines(r).lines()) {
        out.push_str(&format!("\n{line}\n"));
    }
    out
}

/// The report as pretty JSON.
pub fn json(r: &TuneReport) -> String {
    serde_json::to_string_pretty(r).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The environment lines that set `s` for a whole process (comments for
/// what no variable can set).
pub fn env_lines(s: &Setting) -> Vec<String> {
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut notes = Vec::new();
    let mut var = |k: &str, v: String| vars.push((k.to_string(), v));
    if let Some(n) = s.channels {
        var("NCCL_MIN_NCHANNELS", n.to_string());
        var("NCCL_MAX_NCHANNELS", n.to_string());
    }
    if let Some(a) = s.algorithm {
        var("NCCL_ALGO", a.env_name().to_string());
    }
    if let Some(p) = s.protocol {
        var("NCCL_PROTO", p.env_name().to_string());
    }
    for (k, v) in &s.env {
        var(k, v.clone());
    }
    if s.cta_policy != CtaPolicy::Default {
        var("NCCL_CTA_POLICY", s.cta_policy.nccl_value().to_string());
        notes.push("# or ncclConfig_t.CTAPolicy in the application".to_string());
    }
    match s.registration {
        Registration::None => {}
        Registration::Local => {
            notes.push("# needs the application to register its buffers (ncclCommRegister; nccl-tests -R 1)".into())
        }
        Registration::Symmetric => notes.push(
            "# needs symmetric windows (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC; nccl-tests -R 2)".into(),
        ),
    }
    // One `export NAME=VALUE` per variable: each line can be pasted,
    // dropped or diffed on its own.
    let exports = vars
        .iter()
        .map(|(k, v)| format!("export {k}={}", shell_word(v)));
    exports.chain(notes).collect()
}

/// A comment with what `setting` measured in the bands it did not win:
/// the shell lines set one environment for every band, and these are its
/// figures there (each band's own winner is in the table). Figures come
/// from the process-wide phase's fresh pairs where it measured them, else
/// from screening (fewer pairs, marked so). None when it won every band.
fn elsewhere(r: &TuneReport, setting: &Setting, others: &[&BandReport]) -> Option<String> {
    if others.is_empty() {
        return None;
    }
    let confirmed = r.process_wide.as_ref().filter(|p| &p.setting == setting);
    let screened = |b: &BandReport| {
        let status = b
            .candidates
            .iter()
            .find(|c| &c.setting == setting)
            .map(|c| &c.status);
        match status {
            Some(CandidateStatus::Screened { ratio } | CandidateStatus::Pruned { ratio }) => {
                format!("{:+.1}% (screened only)", busbw_gain_pct(ratio).0)
            }
            Some(CandidateStatus::Unsupported { .. }) => "unsupported".into(),
            Some(CandidateStatus::Failed { .. }) => "failed".into(),
            Some(CandidateStatus::NotMeasured) | None => "not measured".into(),
        }
    };
    let figure = |b: &BandReport| {
        let fresh = confirmed.and_then(|p| p.bands.iter().find(|x| x.band == b.band));
        match fresh.map(|x| &x.figure) {
            Some(ProcessWideFigure::Confirmed { ratio, verdict, .. }) => {
                // Both figures come from fresh pairs: where this one is the
                // larger, the band's own pick was not the best there.
                let above_winner = b.gain().is_some_and(|(_, w)| ratio.estimate < w.estimate);
                let note = match verdict {
                    Verdict::Gain if above_winner => " (more than the band's winner)",
                    Verdict::Gain => "",
                    Verdict::NoGain => " (no gain)",
                    Verdict::Slower => " (slower)",
                };
                format!("{}{note}", gain_text(ratio))
            }
            Some(ProcessWideFigure::Unsupported { .. }) => "unsupported".into(),
            Some(ProcessWideFigure::Failed { .. }) => "failed".into(),
            Some(ProcessWideFigure::NotMeasured) | None => screened(b),
        }
    };
    let list: Vec<String> = others
        .iter()
        .map(|b| {
            format!(
                "{} {} {}",
                b.band.op.name(),
                human(b.band.probe_bytes),
                figure(b)
            )
        })
        .collect();
    let how = if confirmed.is_some() {
        "fresh pairs against the defaults"
    } else {
        "screening, fewer pairs, not confirmed"
    };
    Some(format!(
        "# where it did not win, it measured ({how}; each band's winner is in the table): {}\n",
        list.join(", ")
    ))
}

/// `v` as one shell word: as is when it holds only characters no shell
/// reads specially, else single-quoted.
fn shell_word(v: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:,=+%@".contains(c);
    if !v.is_empty() && v.chars().all(plain) {
        return v.to_string();
    }
    format!("'{}'", v.replace('\'', "'\\''"))
}

/// Shell lines for one uniform setting: of the settings that won bands
/// and can be set by environment variables, the one that won the most
/// bands (ties: the larger total gain; [`process_wide_choice`]), with a
/// comment naming where it won, one with its figures in the bands it lost
/// (the shell lines set it for those too: the process-wide phase's fresh
/// pairs, screening where that phase measured nothing), and one warning
/// that a variable applies to every size. The other environments that won
/// bands follow as comments (alternatives: one environment per process),
/// then winners that need the application (buffer registration). Without
/// any winner, one comment says there is nothing to set.
pub fn shell(r: &TuneReport) -> String {
    let wins = winners(&r.bands);
    if wins.is_empty() {
        return "# collbench tune: no setting beat NCCL's defaults by the gain rule; nothing to set\n".to_string();
    }
    let where_won = |bands: &[&BandReport]| {
        let list: Vec<String> = bands
            .iter()
            .map(|b| {
                let g = b.gain().map_or(0.0, |(_, i)| busbw_gain_pct(i).0);
                format!(
                    "{} {} {g:+.1}%",
                    b.band.op.name(),
                    human(b.band.probe_bytes)
                )
            })
            .collect();
        format!(
            "{} of {} bands: {}",
            bands.len(),
            r.bands.len(),
            list.join(", ")
        )
    };
    let mut out = String::new();
    let chosen_setting = process_wide_choice(&r.bands);
    let chosen = wins.iter().find(|w| Some(w.setting) == chosen_setting);
    match chosen {
        Some(Win { setting, bands, .. }) => {
            out.push_str(&format!(
                "# collbench tune: {setting} beat NCCL's defaults in {}{}\n",
                where_won(bands),
                process_pairs(bands.iter().copied()).map_or(String::new(), |n| format!(
                    " (each confirmed in {n} fresh process pairs)"
                ))
            ));
            let others: Vec<&BandReport> = r
                .bands
                .iter()
                .filter(|b| b.gain().map(|g| g.0) != Some(*setting))
                .collect();
            if let Some(line) = elsewhere(r, setting, &others) {
                out.push_str(&line);
            }
            if setting.env.is_empty() {
                out.push_str("# A variable applies to every op and size in the process: use the tuner config for per-band settings.\n");
            } else {
                out.push_str("# NCCL reads these once per process: one value for every op and size (no tuner config sets them per band).\n");
            }
            for l in env_lines(setting) {
                out.push_str(&l);
                out.push('\n');
            }
        }
        None => out
            .push_str("# collbench tune: no winning setting can be set by environment variables\n"),
    }
    // The other environments that won bands, as comments: one environment
    // per process, so these are the alternatives, not additions.
    for Win { setting, bands, .. } in wins
        .iter()
        .filter(|w| w.setting.set_by_environment() && Some(w.setting) != chosen_setting)
    {
        out.push_str(&format!(
            "# instead, {setting} won {} (one environment per process: set it in place of the above where those sizes matter most)\n",
            where_won(bands)
        ));
    }
    for Win { setting, bands, .. } in wins.iter().filter(|w| !w.setting.set_by_environment()) {
        out.push_str(&format!("# also {setting} won {}\n", where_won(bands)));
        for l in env_lines(setting) {
            out.push_str(&l);
            out.push('\n');
        }
    }
    out
}
