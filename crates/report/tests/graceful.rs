//! The reader degrades gracefully (issue #49): each class of line that
//! once refused a whole real log, made from the fixtures. A log with a
//! readable table is read; a row cut by other processes' lines is
//! rejoined when its pieces make exactly one row; what cannot be placed
//! is skipped and counted, and `--strict` still refuses it.

use collbench_core::Record;
use collbench_report::input::Fault;
use collbench_report::parse::{parse_text, parse_text_with, Format, Parsed, Strictness};
use std::path::Path;

fn fixture(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn anchor() -> String {
    fixture("anchors/all_reduce.txt")
}

fn ok(text: &str) -> Parsed {
    parse_text(text, None, "log.txt").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn strict(text: &str) -> Result<Parsed, String> {
    parse_text_with(text, None, "log.txt", Strictness::Refuse).map_err(|e| e.to_string())
}

/// The anchor's rows, as read from the plain anchor.
fn plain() -> Record {
    ok(&anchor()).records.remove(0)
}

/// The anchor with `f` applied to each row line (those that start with
/// spaces and a size).
fn rows_mapped(f: impl Fn(usize, &str) -> String) -> String {
    let mut k = 0;
    anchor()
        .lines()
        .map(|l| {
            if l.starts_with("  ") && l.trim_start().starts_with(|c: char| c.is_ascii_digit()) {
                k += 1;
                f(k, l)
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

/// Splits a row after its out-of-place half (9 columns).
fn halves(row: &str) -> (String, String) {
    let toks: Vec<&str> = row.split_whitespace().collect();
    (
        format!("  {}", toks[..9].join("  ")),
        format!("  {}", toks[9..].join("  ")),
    )
}

const INFO: &str = "node2:4242:4300 [3] NCCL INFO Channel 07/0 : 3[3] -> 4[4] via P2P/CUMEM/read";

#[test]
fn rows_cut_by_nccl_info_lines_are_rejoined() {
    // Every 3rd row: INFO glued after its first half, more INFO lines,
    // then its second half on a line of its own.
    let text = rows_mapped(|k, l| {
        if k % 3 != 0 {
            return format!("{l}\n");
        }
        let (a, b) = halves(l);
        format!("{a}{INFO}\n{INFO}\nlibfabric:77:1700::efa:core:x\n{b}\n")
    });
    let p = ok(&text);
    assert_eq!(p.records[0].results, plain().results);
    assert!(p.skipped.is_empty(), "{:?}", p.skipped);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    // Rejoining places every piece: --strict reads it the same.
    assert_eq!(strict(&text).unwrap().records[0].results, plain().results);
}

#[test]
fn a_fragment_that_does_not_rejoin_is_skipped_never_guessed() {
    // The second half of one row never comes: the next row follows.
    let text = rows_mapped(|k, l| match k {
        5 => format!("{}{INFO}\n", halves(l).0),
        _ => format!("{l}\n"),
    });
    let p = ok(&text);
    let want = plain().results.len() - 1;
    assert_eq!(p.records[0].results.len(), want);
    assert_eq!(p.skipped.len(), 1);
    let s = &p.skipped[0];
    assert_eq!((s.count, s.line), (1, 17));
    assert!(s.reason.contains("expected a row of 13 columns"), "{s}");
    assert!(
        s.to_string()
            .starts_with("log.txt: 1 line skipped; first: line 17 '128"),
        "{s}"
    );
    let e = strict(&text).unwrap_err();
    assert!(
        e.starts_with("line 17: expected a row of 13 columns"),
        "{e}"
    );
}

#[test]
fn a_log_ending_in_a_cut_row_is_partial() {
    let a = anchor();
    let last = a.lines().rfind(|l| l.starts_with("  ")).unwrap();
    let at = a.find(last).unwrap();
    let text = format!("{}{}{INFO}\n{INFO}\n", &a[..at], halves(last).0);
    let p = ok(&text);
    assert_eq!(p.records[0].results.len(), plain().results.len() - 1);
    assert!(p.partial(), "{:?}", p.warnings);
    assert!(
        p.faults.iter().all(|f| matches!(f, Fault::CutShort { .. })),
        "{:?}",
        p.faults
    );
    assert!(p.skipped.is_empty());
}

#[test]
fn a_first_line_with_a_bracket_is_not_json() {
    for first in [
        "[user@gpu-node-07 nccl-tests]$ ./build/all_reduce_perf -b 8 -e 8G -f 2 -g 2",
        "[1,0]<stdout>:some wrapper line",
        "[gpu-node-07:12345] mca_base_component_repository_open: unable to open",
    ] {
        let p = ok(&format!("{first}\n{}", anchor()));
        assert_eq!(p.records[0].results, plain().results, "{first}");
    }
}

#[test]
fn notes_after_rows_are_left_out() {
    let text = rows_mapped(|k, l| match k {
        4 => format!("{l}   <- protocol switch\n"),
        7 => format!("{l}  # here\n"),
        _ => format!("{l}\n"),
    });
    let p = ok(&text);
    assert_eq!(p.records[0].results, plain().results);
    assert!(p.skipped.is_empty(), "{:?}", p.skipped);
}

#[test]
fn a_crash_glued_to_a_row_keeps_the_row_and_is_a_crash() {
    let text = rows_mapped(|k, l| match k {
        10 => format!("{l}Test NCCL failure common.cu:1088 'unhandled system error'\n"),
        _ => format!("{l}\n"),
    });
    let p = ok(&text);
    assert_eq!(p.records[0].results, plain().results);
    assert!(
        p.faults.iter().any(|f| matches!(f, Fault::Crashed { .. })),
        "{:?}",
        p.faults
    );
}

#[test]
fn a_header_without_its_hash_is_read() {
    let text: String = anchor()
        .lines()
        .map(|l| {
            let t = l.trim_start();
            if t.starts_with("#       size") || t.starts_with("#        (B)") {
                format!("{}\n", l.replacen('#', " ", 1))
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let p = ok(&text);
    assert_eq!(p.records[0].results, plain().results);
}

#[test]
fn tabs_among_the_columns_are_read() {
    let text =
        rows_mapped(|_, l| format!("{}\n", l.split_whitespace().collect::<Vec<_>>().join("\t")));
    assert_eq!(ok(&text).records[0].results, plain().results);
}

#[test]
fn mpi_tags_on_the_rows_only_are_stripped() {
    let text = rows_mapped(|_, l| format!("[1,0]<stdout>:{l}\n"));
    let p = ok(&text);
    assert_eq!(p.records[0].results, plain().results);
}

#[test]
fn several_osu_tables_with_notes_between_are_read() {
    let bw = fixture("foreign/osu_bw__ai-fabric-lab-v7.4.txt");
    let lat = fixture("foreign/osu_latency__ai-fabric-lab-v7.4.txt");
    let text = format!(
        "$ srun -N 2 osu_bw\n{bw}\nreal 0m3.2s\nthen the latency:\n\n{lat}\nall done, 2 tables\n"
    );
    let p = ok(&text);
    let ops: Vec<String> = p.records.iter().map(|r| r.ops().join(",")).collect();
    assert_eq!(ops, ["osu_bw", "osu_latency"]);
    assert_eq!(p.records[0].results.len(), ok(&bw).records[0].results.len());
    assert_eq!(
        p.records[1].results.len(),
        ok(&lat).records[0].results.len()
    );
    // A title and header pasted without '#'.
    let bare = bw.replace("# OSU", "OSU").replace("# Size", "Size");
    assert_eq!(ok(&bare).records[0].results, ok(&bw).records[0].results);
}

#[test]
fn an_unreadable_log_is_refused_naming_its_first_bad_line() {
    // A table whose every row is bad: nothing is read, so the file is
    // refused, naming the first line and why (not "no rows found").
    let text = rows_mapped(|_, l| format!("{}\n", l.replacen("float", "float  x", 1)));
    let e = parse_text(&text, None, "log.txt").unwrap_err();
    assert_eq!(e.line, 13, "{e}");
    assert!(e.message.contains("expected a row of 13 columns"), "{e}");
}

#[test]
fn nccl_tests_2_20_json_with_bitwise_keys_is_read() {
    let j = fixture("anchors/all_reduce.json");
    let bitwise = r#""nwrong":0.0,"bitwise":{"repeats":4,"different_elements":0,"different_bits":0,"first_repeat":null,"first_rank":null,"first_element":null,"first_bit":null}"#;
    let v3 = j.replace("\"nwrong\":0.0", bitwise).replace(
        "\"validation\":1,",
        "\"validation\":1,\"bitwise_repeats\":4,",
    );
    assert_ne!(v3, j);
    let p = parse_text(&v3, None, "j.json").unwrap();
    let plain = parse_text(&j, None, "j.json").unwrap();
    // The bitwise keys (nccl-tests' -B, its pull request #388) are read
    // (issue #52); everything else is as without them.
    assert_eq!(p.records[0].settings.bitwise_repeats, 4);
    let mut read = p.records[0].results.clone();
    for r in &mut read {
        for pl in [&mut r.out_of_place, &mut r.in_place].into_iter().flatten() {
            let b = pl
                .bitwise
                .take()
                .expect("every placement has its bitwise object");
            assert_eq!((b.repeats, b.different_bits, b.first), (4, 0, None));
        }
    }
    assert_eq!(read, plain.records[0].results);
    assert_eq!(
        collbench_report::parse::detect::detect(&v3),
        Some(Format::NcclJson)
    );
}

#[test]
fn per_iteration_and_bitwise_columns_are_read() {
    // nccl-tests 2.20 `-I 1 -B 4`: `#bitdiff` and `i_*` columns in each half.
    let text = anchor()
        .replace(
            "#wrong     time   algbw   busbw  #wrong ",
            "#wrong  #bitdiff    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong  #bitdiff    i_min    i_max    i_p99    i_cv%",
        );
    let text = {
        let mut k = 0;
        text.lines()
            .map(|l| {
                if l.starts_with("  ") && l.trim_start().starts_with(|c: char| c.is_ascii_digit()) {
                    k += 1;
                    let t: Vec<&str> = l.split_whitespace().collect();
                    let extra = "0   11.00   13.00   12.90    2.10";
                    format!(
                        "  {}  {extra}  {}  {extra}\n",
                        t[..9].join("  "),
                        t[9..].join("  ")
                    )
                } else {
                    format!("{l}\n")
                }
            })
            .collect::<String>()
    };
    let p = ok(&text);
    // #bitdiff is read (issue #52: 0 bits differed, the repeats unknown
    // without the header's Bitwise Repeatability line); the rest as plain.
    let mut read = p.records[0].results.clone();
    for r in &mut read {
        for pl in [&mut r.out_of_place, &mut r.in_place].into_iter().flatten() {
            let b = pl.bitwise.take().expect("#bitdiff read");
            assert_eq!(b.different_bits, 0);
        }
    }
    assert_eq!(read, plain().results);
}

/// `compare` skips what it cannot place (named in its JSON's
/// `skipped_lines`), and refuses the input with `--strict`.
#[test]
fn compare_skips_lines_and_strict_refuses() {
    use collbench_report::{compare_main, CompareFormat, CompareOptions, CompareOutcome};
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.txt");
    let new = dir.path().join("new.txt");
    std::fs::write(&base, anchor()).unwrap();
    let bad = rows_mapped(|k, l| match k {
        3 => format!("{}\n", l.replacen("float", "float  x", 1)),
        _ => format!("{l}\n"),
    });
    std::fs::write(&new, bad).unwrap();
    let mut args = CompareOptions {
        base,
        new,
        base_runs: Vec::new(),
        new_runs: Vec::new(),
        threshold: 5.0,
        format: CompareFormat::Json,
        input_format: None,
        trust_base: false,
        subset: true,
        html: None,
        topology: None,
        strict: false,
    };
    let (outcome, json) = compare_main(&args).unwrap();
    assert_ne!(outcome, CompareOutcome::Unusable, "{json}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let skipped = doc["skipped_lines"][0].as_str().unwrap();
    assert!(
        skipped.starts_with("NEW ") && skipped.contains("1 line skipped; first: line 15"),
        "{skipped}"
    );
    args.strict = true;
    let (outcome, _) = compare_main(&args).unwrap();
    assert_eq!(outcome, CompareOutcome::Unusable);
}

#[test]
fn rows_behind_a_forks_tag_are_read() {
    let text = rows_mapped(|_, l| format!("[STAT]:{}\n", l.trim_start()));
    assert_eq!(ok(&text).records[0].results, plain().results);
}

#[test]
fn rows_with_only_their_out_of_place_half_are_read_and_said() {
    let text = rows_mapped(|_, l| format!("{}\n", halves(l).0));
    let p = ok(&text);
    let rows = &p.records[0].results;
    assert_eq!(rows.len(), plain().results.len());
    assert!(rows.iter().all(|r| r.in_place.is_none()));
    assert!(p.skipped.is_empty(), "{:?}", p.skipped);
    assert!(
        p.warnings
            .iter()
            .any(|w| w.message.starts_with("31 row(s) have no in-place half")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn an_osu_barrier_without_sizes_is_read() {
    let text = "# OSU MPI Barrier Latency Test v7.3\n# Avg Latency(us)\n           401.42\n";
    let p = ok(text);
    assert_eq!(p.records[0].ops(), ["osu_barrier"]);
    let r = &p.records[0].results[0];
    assert_eq!(r.out_of_place.as_ref().unwrap().time_us, 401.42);
}
