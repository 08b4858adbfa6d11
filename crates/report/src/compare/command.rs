//! `collbench compare` as a command: read each side's runs, gate on
//! correctness, compare, and say what it came to.

use super::gate::{self, Failure};
use super::{compare_runs, Overall};
use crate::compare_out::{self, CompareFormat};
use crate::compare_sides;
use crate::error::Error;
use crate::input::{identity, total, InputSet, Inputs};
use crate::parse::{read_file_with, Format, Strictness};
use collbench_core::{diag, Record};
use std::path::PathBuf;

/// What `collbench compare` compares and how (the CLI fills it from its
/// flags).
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// The reference: a log, or a folder whose files are runs of it.
    pub base: PathBuf,
    /// The run to judge against `base`: a log or a folder of runs.
    pub new: PathBuf,
    /// More runs of BASE (`--base-run`).
    pub base_runs: Vec<PathBuf>,
    /// More runs of NEW (`--new-run`).
    pub new_runs: Vec<PathBuf>,
    /// Percent change that counts as a regression (the rule is
    /// [`super::rule`]'s).
    pub threshold: f64,
    /// What stdout carries.
    pub format: CompareFormat,
    /// Read both inputs as this format instead of detecting it.
    pub input_format: Option<Format>,
    /// Judge against a BASE that failed its own correctness gate.
    pub trust_base: bool,
    /// NEW may measure fewer cases than BASE without counting as cut short.
    pub subset: bool,
    /// Also write the comparison as a self-contained HTML page with
    /// charts here ([`crate::render::compare_html`]). The CLI checks the
    /// path (never an input, no existing file without `--force`) before
    /// this runs.
    pub html: Option<PathBuf>,
    /// The machine both sides ran on (`--topology`): records without a
    /// topology of their own get its ceilings, so NEW's rows show "% of
    /// ceiling" for other tools' logs too.
    pub topology: Option<collbench_core::Topology>,
    /// Refuse an input with a line its reader cannot place, or a file of a
    /// folder that cannot be read (`--strict`), instead of skipping it.
    pub strict: bool,
}

/// What `collbench compare` found (the CLI turns it into the exit code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOutcome {
    /// No case regressed.
    NoRegression,
    /// At least one case regressed beyond the threshold (confirmed by an
    /// adjacent case).
    Regression,
    /// NEW has wrong results, an out-of-bounds FAILED line, an error or
    /// crash line, or was cut short: it fails whatever its speed.
    NewFailed,
    /// No case regressed, but an op drops beyond the threshold within its
    /// noise: the inputs cannot tell.
    CannotTell,
    /// An input could not be read, the two share no case, or BASE failed
    /// its own correctness gate (said on stderr).
    Unusable,
}

/// One side's runs, read: a run per file (a folder gives one per file in
/// it), with what was noticed. `runs` are ranges of `inputs`' records,
/// `names` their files; a run saved twice is counted once.
struct Side {
    runs: Vec<std::ops::Range<usize>>,
    names: Vec<String>,
    inputs: Inputs,
}

/// The files of one side: `first` and `more` walked (folders opened).
fn walk_side(first: &PathBuf, more: &[PathBuf]) -> Result<InputSet, crate::FileError> {
    let paths: Vec<PathBuf> = std::iter::once(first).chain(more).cloned().collect();
    InputSet::walk(&paths)
}

/// Reads one side's files as `args.input_format` says; records without
/// a topology of their own get `args.topology`'s ceilings. A file that
/// is the same run as an earlier one (`role` names the side in the line
/// that says so) is counted once.
fn read_side(
    set: InputSet,
    role: &str,
    args: &CompareOptions,
    rows: &mut total::Rows,
) -> Result<Side, crate::FileError> {
    let mut side = Side {
        runs: Vec::new(),
        names: Vec::new(),
        inputs: Inputs {
            skipped: set.skipped,
            repeated: set.repeated,
            ..Inputs::default()
        },
    };
    let strictness = if args.strict {
        Strictness::Refuse
    } else {
        Strictness::Skip
    };
    for file in &set.files {
        match read_file_with(&file.path, args.input_format, strictness) {
            Ok(one) if !one.records.is_empty() => {
                rows.add(&file.path, &one.records, FIX)?;
                let start = side.inputs.parsed.records.len();
                side.runs.push(start..start + one.records.len());
                side.names.push(file.path.display().to_string());
                side.inputs.parsed.append(one);
            }
            Ok(one) => side.inputs.parsed.append(one),
            Err(e) if file.in_folder && !args.strict => side.inputs.skipped.push(e.to_string()),
            Err(e) => return Err(e),
        }
    }
    if args.strict {
        if let Some(first) = side.inputs.skipped.first() {
            return Err(crate::FileError::LeftOut {
                line: first.clone(),
            });
        }
    }
    count_once(&mut side, role);
    if let Some(machine) = &args.topology {
        for r in &mut side.inputs.parsed.records {
            collbench_ceiling::annotate_described(r, machine);
        }
    }
    Ok(side)
}

/// Counts a run saved twice (`collbench run --output X.json > X.txt`)
/// once, keeping the file with more to say (per-iteration statistics, a
/// start time), and says so in one line per pair.
fn count_once(side: &mut Side, role: &str) {
    let records = &side.inputs.parsed.records;
    let run = |k: usize| &records[side.runs[k].clone()];
    let richness = |k: usize| {
        let stats = run(k)
            .iter()
            .flat_map(|r| &r.results)
            .flat_map(|c| c.placements())
            .filter(|(_, p)| p.stats.is_some())
            .count();
        (stats, run(k).iter().any(|r| r.start_time.is_some()))
    };
    let mut kept: Vec<usize> = Vec::new();
    for k in 0..side.runs.len() {
        let twin = kept
            .iter()
            .enumerate()
            .find_map(|(at, &j)| identity::one_run(run(j), run(k)).map(|why| (at, j, why)));
        match twin {
            Some((at, j, why)) => {
                diag::line(&format!(
                    "collbench compare: {role}: {} and {} are one run (same {why}); counted once",
                    side.names[j], side.names[k]
                ));
                if richness(k) > richness(j) {
                    kept[at] = k;
                }
            }
            None => kept.push(k),
        }
    }
    side.runs = kept.iter().map(|&k| side.runs[k].clone()).collect();
    side.names = kept.iter().map(|&k| side.names[k].clone()).collect();
}

/// Each run of a side as a slice.
fn refs(s: &Side) -> Vec<&[Record]> {
    let records = &s.inputs.parsed.records;
    s.runs.iter().map(|r| &records[r.clone()]).collect()
}

/// What a NEW that cannot be read still says: its crash or error lines
/// (a run that died before its first row), read within a bound.
fn crash_lines(path: &std::path::Path) -> Vec<Failure> {
    use std::io::Read;
    let mut text = Vec::new();
    let read =
        std::fs::File::open(path).and_then(|f| f.take(CRASH_SCAN_BYTES).read_to_end(&mut text));
    if path.is_dir() || read.is_err() {
        return Vec::new();
    }
    let origin = path.display().to_string();
    gate::of_faults(&crate::input::fault::crashes(
        &String::from_utf8_lossy(&text),
        &origin,
    ))
}

/// How much of an unreadable NEW is searched for crash lines.
const CRASH_SCAN_BYTES: u64 = 16 << 20;

/// What to do when the inputs are over a total bound.
const FIX: &str = "compare fewer runs a side, or keep in the folders only the runs you mean";

/// What `compare_main` returns.
type Answer = Result<(CompareOutcome, String), Error>;

/// An input that cannot be used: its line on stderr, exit 2.
fn unusable(line: String) -> Answer {
    diag::line(&format!("collbench compare: {line}"));
    Ok((CompareOutcome::Unusable, String::new()))
}

/// NEW failed its correctness gate: the lines that say why.
fn failed(failures: &[Failure]) -> Answer {
    let text = gate::lines("NEW", failures).join("\n") + "\n";
    Ok((CompareOutcome::NewFailed, text))
}

/// Both sides read (NEW first: a NEW that crashed says so even when BASE
/// cannot be read), or the answer to give instead. Their files together
/// are bounded before either is read.
fn read_both(args: &CompareOptions) -> Result<(Side, Side), Answer> {
    let new_set = walk_side(&args.new, &args.new_runs);
    let base_set = walk_side(&args.base, &args.base_runs);
    if let (Ok(b), Ok(n)) = (&base_set, &new_set) {
        if let Err(e) = total::check(&[("BASE", b), ("NEW", n)], FIX) {
            return Err(unusable(e.to_string()));
        }
    }
    let mut rows = total::Rows::default();
    let new = match new_set.and_then(|set| read_side(set, "NEW", args, &mut rows)) {
        Ok(n) => n,
        Err(e @ crate::FileError::TooManyRows { .. }) => return Err(unusable(e.to_string())),
        Err(e) => {
            let crashed = crash_lines(&args.new);
            diag::line(&format!("collbench compare: {e}"));
            return Err(if crashed.is_empty() {
                unusable(format!("NEW {} cannot be read", args.new.display()))
            } else {
                failed(&crashed)
            });
        }
    };
    match base_set.and_then(|set| read_side(set, "BASE", args, &mut rows)) {
        Ok(base) => Ok((base, new)),
        Err(e) => Err(unusable(e.to_string())),
    }
}

/// Runs `collbench compare`: returns the text (or JSON) for stdout, empty
/// when unusable, and what it came to. Lines about the inputs go to
/// [`collbench_core::diag`] (stderr). NEW's correctness is judged first:
/// a NEW that failed says so (exit 1) even when nothing else can be
/// compared.
pub fn compare_main(args: &CompareOptions) -> Result<(CompareOutcome, String), Error> {
    if !(args.threshold.is_finite() && (0.0..100.0).contains(&args.threshold)) {
        return Err(Error::Threshold);
    }
    let (base, new) = match read_both(args) {
        Ok(sides) => sides,
        Err(early) => return early,
    };
    for line in base
        .inputs
        .lines_for_people()
        .into_iter()
        .chain(new.inputs.lines_for_people())
    {
        diag::line(&format!("collbench compare: {line}"));
    }
    let base_failures = gate::of_faults(&base.inputs.parsed.faults);
    if let Some(f) = base_failures.first() {
        if !args.trust_base {
            return unusable(format!(
                "BASE cannot be trusted as a reference: {f} (--trust-base to compare anyway)"
            ));
        }
        diag::line(&format!(
            "collbench compare: warning: BASE failed its own gate ({f}); compared anyway \
             (--trust-base)"
        ));
    }
    let mut failures = gate::of_faults(&new.inputs.parsed.faults);
    let cmp = compare_runs(&refs(&base), &refs(&new), args.threshold);
    if cmp.rows.is_empty() {
        if !failures.is_empty() {
            return failed(&failures);
        }
        return unusable(format!(
            "{} and {} have no case (op, type, size) in common",
            args.base.display(),
            args.new.display()
        ));
    }
    if !args.subset && !cmp.only_base.is_empty() {
        failures.push(Failure::MissingCases {
            origin: args.new.display().to_string(),
            count: cmp.only_base.len(),
            first: cmp.only_base[0].clone(),
        });
    }
    let text = render(args, &base, &new, &cmp, &failures)?;
    let outcome = if !failures.is_empty() {
        CompareOutcome::NewFailed
    } else {
        match cmp.overall() {
            Overall::NoRegression => CompareOutcome::NoRegression,
            Overall::Regression => CompareOutcome::Regression,
            Overall::CannotTell => CompareOutcome::CannotTell,
        }
    };
    Ok((outcome, text))
}

/// The text or JSON for stdout; the HTML page where asked.
fn render(
    args: &CompareOptions,
    base: &Side,
    new: &Side,
    cmp: &super::Comparison,
    failures: &[Failure],
) -> Result<String, Error> {
    let (bs, ns) = (
        compare_sides::side(&base.inputs.parsed.records),
        compare_sides::side(&new.inputs.parsed.records),
    );
    let (base_name, new_name) = (
        args.base.display().to_string(),
        args.new.display().to_string(),
    );
    let sides = compare_out::Sides {
        base_name: &base_name,
        new_name: &new_name,
        base: &bs,
        new: &ns,
    };
    if let Some(path) = &args.html {
        std::fs::write(path, crate::render::compare_html::render(&sides, cmp)).map_err(
            |error| Error::Write {
                path: path.clone(),
                error,
            },
        )?;
    }
    Ok(match args.format {
        CompareFormat::Text => compare_out::text(&sides, cmp, failures),
        CompareFormat::Json => {
            let skipped: Vec<String> = base
                .inputs
                .parsed
                .skipped
                .iter()
                .map(|s| format!("BASE {s}"))
                .chain(new.inputs.parsed.skipped.iter().map(|s| format!("NEW {s}")))
                .collect();
            compare_out::json_noted(&sides, cmp, failures, &skipped)
        }
    })
}
