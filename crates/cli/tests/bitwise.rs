//! `run -B N` as a user runs it (issue #52): bitwise repeatability in
//! nccl-tests' layout (docs/nccl-tests-facts.md, "Bitwise repeatability",
//! read from nccl-tests' pull request #388), a flipped bit named exactly
//! by repeat, rank, element and bit, `report`/`compare` reading both the
//! text and the JSON, and 100 clean repeats on the CPU backend with no
//! bit differing.

mod common;

use common::{collbench, cpu_run};
use std::path::Path;

/// nccl-tests' `"# %10s  %12s  %8s  %6s  %6s"` with these cells.
fn lead(cells: [&str; 5]) -> String {
    format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}",
        cells[0], cells[1], cells[2], cells[3], cells[4]
    )
}

/// A 2-rank all_reduce of 1 KiB floats with `extra` flags: its stdout,
/// exit code, and the collbench and nccl-tests JSON it wrote.
fn run(dir: &Path, extra: &[&str]) -> (String, i32, serde_json::Value, String) {
    let json = dir.join("run.json");
    let nt = dir.join("nt.json");
    let out = cpu_run("all_reduce", "2")
        .args(["-b", "1K", "-e", "1K", "-n", "2", "--output"])
        .arg(&json)
        .arg("-J")
        .arg(&nt)
        .args(extra)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    std::fs::write(dir.join("run.txt"), &text).unwrap();
    let record = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let nt = std::fs::read_to_string(&nt).unwrap();
    (text, out.status.code().unwrap_or(-1), record, nt)
}

/// `record` is valid against schema/record.schema.json.
fn assert_valid(record: &serde_json::Value) {
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/record.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(record)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn the_layout_is_nccl_tests_own() {
    let dir = tempfile::tempdir().unwrap();
    let (text, code, record, nt) = run(dir.path(), &["-B", "3"]);
    assert_eq!(code, 0, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    // The report line, with its trailing space, right under the settings.
    let at = lines
        .iter()
        .position(|l| l.starts_with("# nThread"))
        .unwrap();
    assert_eq!(
        lines[at + 1],
        "# Bitwise Repeatability: 3 comparisons after one reference run "
    );
    // The header: captions, names and units as nccl-tests prints them.
    let head = lines
        .iter()
        .position(|l| l.contains("out-of-place"))
        .unwrap();
    let blank = lead(["", "", "", "", ""]);
    assert_eq!(
        lines[head],
        format!(
            "{blank}{}out-of-place + bitwise{}in-place + bitwise{}",
            " ".repeat(15),
            " ".repeat(27),
            " ".repeat(10)
        )
    );
    let half = |a: &str, b: &str, c: &str, d: &str, e: &str| {
        format!("  {a:>7}  {b:>6}  {c:>6}  {d:>6}  {e:>8}")
    };
    let names = half("time", "algbw", "busbw", "#wrong", "#bitdiff");
    let units = half("(us)", "(GB/s)", "(GB/s)", "", "");
    assert_eq!(
        lines[head + 1],
        format!(
            "{}{names}{names} ",
            lead(["size", "count", "type", "redop", "root"])
        )
    );
    assert_eq!(
        lines[head + 2],
        format!("{}{units}{units} ", lead(["(B)", "(elements)", "", "", ""]))
    );
    // The row: #bitdiff (%8g) after each placement's #wrong.
    let row: Vec<&str> = lines[head + 3].split_whitespace().collect();
    assert_eq!(row.len(), 15, "{}", lines[head + 3]);
    assert_eq!((row[8], row[9], row[13], row[14]), ("0", "0", "0", "0"));
    assert!(
        lines[head + 3].ends_with("         0"),
        "%8g: {}",
        lines[head + 3]
    );
    // The footer: the mismatches line between nccl-tests' two.
    let oob = lines
        .iter()
        .position(|l| l.starts_with("# Out of bounds"))
        .unwrap();
    assert_eq!(lines[oob + 1], "# Bitwise mismatches   : 0 OK");
    assert!(lines[oob + 2].starts_with("# Avg bus bandwidth"));
    assert!(!text.contains("# Bitwise mismatch ("), "{text}");
    // -J: nccl-tests' keys, in its order.
    for want in [
        r#""validation":1,"bitwise_repeats":3,"graph":0"#,
        r#""nwrong":0.000000,"bitwise":{"repeats":3,"different_elements":0,"different_bits":0,"first_repeat":null,"first_rank":null,"first_element":null,"first_bit":null}}"#,
        r#""out_of_bounds":{"count":0,"okay":"true"},"bitwise_mismatches":{"count":0,"okay":"true"},"average_bus_bandwidth""#,
    ] {
        assert!(nt.contains(want), "{want}\n{nt}");
    }
    // collbench's record, valid against its schema.
    assert_valid(&record);
    assert_eq!(record["settings"]["bitwise_repeats"], 3);
    for place in ["out_of_place", "in_place"] {
        let b = &record["results"][0][place]["bitwise"];
        assert_eq!(
            (b["repeats"].as_u64(), b["different_bits"].as_u64()),
            (Some(3), Some(0))
        );
        assert!(b.get("first").is_none(), "{b}");
    }
}

#[test]
fn without_the_flag_the_table_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (text, code, record, nt) = run(dir.path(), &[]);
    assert_eq!(code, 0);
    assert!(!text.contains("itwise"), "{text}");
    assert!(!nt.contains("\"bitwise"), "{nt}");
    assert!(record["settings"].get("bitwise_repeats").is_none());
}

#[test]
fn a_flipped_bit_is_named_exactly_and_fails_run_report_and_compare() {
    let dir = tempfile::tempdir().unwrap();
    let (base, code, _, _) = run(dir.path(), &["-B", "4"]);
    assert_eq!(code, 0, "{base}");
    std::fs::rename(dir.path().join("run.json"), dir.path().join("base.json")).unwrap();
    std::fs::remove_file(dir.path().join("nt.json")).unwrap();
    // Repeat 2, rank 1, element 5 (of 256 floats), bit 30.
    let (text, code, record, nt) = run(dir.path(), &["-B", "4", "--test-bitwise-flip", "2:1:5:30"]);
    assert_eq!(code, 1, "{text}");
    for mode in ["out-of-place", "in-place"] {
        let line = format!(
            "# Bitwise mismatch ({mode}): first repeat 2, rank 1, element 5, bit 30; 1 elements and 1 bits differ"
        );
        assert!(text.lines().any(|l| l == line), "{line}\n{text}");
    }
    assert!(
        text.contains("# Bitwise mismatches   : 2 FAILED\n"),
        "{text}"
    );
    assert_valid(&record);
    let b = &record["results"][0]["out_of_place"]["bitwise"];
    assert_eq!(
        b["first"],
        serde_json::json!({"repeat": 2, "rank": 1, "element": 5, "bit": 30})
    );
    assert_eq!(
        (
            b["different_elements"].as_u64(),
            b["different_bits"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert!(nt.contains(r#""different_bits":1,"first_repeat":2,"first_rank":1,"first_element":5,"first_bit":30}"#), "{nt}");
    assert!(
        nt.contains(r#""bitwise_mismatches":{"count":2,"okay":"false"}"#),
        "{nt}"
    );
    // compare reads the JSON record and the text log alike, and fails
    // NEW naming the flipped bit.
    for new in ["run.json", "run.txt"] {
        let out = collbench()
            .current_dir(dir.path())
            .args(["compare", "base.json", new])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{new}: {said}");
        assert!(
            said.contains("bitwise mismatch: 1 bit(s) differ between repeats on the same input in all_reduce float sum")
                && said.contains("(first: repeat 2, rank 1, element 5, bit 30)"),
            "{new}: {said}"
        );
    }
    // report reads the -B lines of the text log and the record alike,
    // and says which bit differed.
    for input in ["run.txt", "run.json"] {
        let out = collbench()
            .current_dir(dir.path())
            .args(["report", input])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("bitwise mismatch: 1 bit(s) differ between repeats on the same input in all_reduce float sum 1 KiB in-place (first: repeat 2, rank 1, element 5, bit 30)"),
            "{input}: {said}"
        );
    }
}

#[test]
fn a_hundred_clean_repeats_differ_nowhere_on_the_cpu_backend() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("all.json");
    let out = cpu_run("all", "4")
        .args(["-b", "1K", "-e", "64K", "-f", "8", "-n", "1", "-w", "0"])
        .args(["-d", "float,double", "-B", "100", "--output"])
        .arg(&json)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let mut compared = 0;
    for row in record["results"].as_array().unwrap() {
        for place in ["out_of_place", "in_place"] {
            let b = &row[place]["bitwise"];
            assert_eq!(b["repeats"], 100, "{row}");
            assert_eq!(b["different_bits"], 0, "{row}");
            compared += 1;
        }
    }
    // Every collective, two types, three sizes, two placements.
    assert!(compared >= 10 * 2 * 3 * 2, "{compared}");
    let footers = text.matches("# Bitwise mismatches   : 0 OK\n").count();
    assert!(footers >= 10, "{text}");
    assert!(!text.contains("FAILED"), "{text}");
}
