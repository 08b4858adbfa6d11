//! No function in the crates held to it (launch, mpi, nccl, runner, tune,
//! check, doctor, and the CLI's `src/`; read from the CLI's tests, beside
//! the other source scans) is longer than 80 lines (from its `fn` line to
//! the closing brace), and no source file of those crates is longer than
//! 600 lines, so that each reads on one screen and each file holds one
//! job: a long one is split along its seams. The scanner is rough on
//! purpose: it counts braces outside comments, strings and character
//! literals. The other crates are still over (issue #43):
//! `the_rest_of_the_workspace` prints where.

mod common;

use common::source::{crate_names, crate_sources, functions};

const MAX_LINES: usize = 80;
const MAX_FILE_LINES: usize = 600;

/// The crates held to the function limit.
const HELD: [&str; 8] = [
    "launch", "mpi", "nccl", "runner", "tune", "cli", "check", "doctor",
];

/// The crates held to the file limit too.
const FILES_HELD: [&str; 8] = [
    "launch", "mpi", "nccl", "runner", "tune", "cli", "check", "doctor",
];

/// Long functions of the held crates left for now, by file and name, each
/// with why: a file another branch is changing is split there.
const NOT_YET: [(&str, &str, &str); 2] = [
    (
        "tune/src/tuner_csv.rs",
        "parse_line",
        "tuner-config reading is being changed on another branch",
    ),
    (
        "launch/src/world.rs",
        "discover_from",
        "the world's discovery is being changed on another branch",
    ),
];

/// Each function over [`MAX_LINES`] and each file over
/// [`MAX_FILE_LINES`] of crate `krate`, one line each.
fn too_long(krate: &str) -> (Vec<String>, Vec<String>) {
    let (mut long_fns, mut long_files) = (Vec::new(), Vec::new());
    for path in crate_sources(krate) {
        let text = std::fs::read_to_string(&path).unwrap();
        let shown = path
            .strip_prefix(common::source::crates_dir())
            .unwrap()
            .display()
            .to_string();
        for (line, name, lines) in functions(&text) {
            let waiting = NOT_YET.iter().any(|(f, n, _)| *f == shown && *n == name);
            if lines > MAX_LINES && !waiting {
                long_fns.push(format!("{shown}:{line}: fn {name} is {lines} lines"));
            }
        }
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            long_files.push(format!("{shown}: {lines} lines"));
        }
    }
    (long_fns, long_files)
}

#[test]
fn no_runner_function_is_over_80_lines() {
    let long: Vec<String> = HELD.iter().flat_map(|k| too_long(k).0).collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_LINES} lines (split them along their seams):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_file_is_over_600_lines() {
    let long: Vec<String> = FILES_HELD.iter().flat_map(|k| too_long(k).1).collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them along their seams):\n{}",
        long.join("\n")
    );
}

/// What is left of issue #43's limits in the crates not held to them yet,
/// printed (`--no-capture`) rather than failed.
#[test]
fn the_rest_of_the_workspace() {
    let (mut fns, mut files) = (Vec::new(), Vec::new());
    for k in crate_names() {
        let (f, l) = too_long(&k);
        if !HELD.contains(&k.as_str()) {
            fns.extend(f);
        }
        if !FILES_HELD.contains(&k.as_str()) {
            files.extend(l);
        }
    }
    for (file, name, why) in NOT_YET {
        fns.push(format!("{file}: fn {name} ({why})"));
    }
    println!(
        "TODO (#43): {} functions over {MAX_LINES} lines and {} files over {MAX_FILE_LINES} lines not held yet:\n{}\n{}",
        fns.len(),
        files.len(),
        fns.join("\n"),
        files.join("\n")
    );
}

/// Each function left for now is still long: one split comes off the list.
#[test]
fn the_functions_left_are_still_long() {
    for (file, name, _) in NOT_YET {
        let text = std::fs::read_to_string(common::source::crates_dir().join(file)).unwrap();
        let lines = functions(&text)
            .into_iter()
            .find(|(_, n, _)| n == name)
            .map_or(0, |(_, _, lines)| lines);
        assert!(
            lines > MAX_LINES,
            "{file}: fn {name} is {lines} lines: take it off NOT_YET"
        );
    }
}

#[test]
fn the_scanner_counts_code_braces_only() {
    let src = "fn a() {\n    let s = \"}}\";\n    // }\n    let c = '{';\n    /* { */\n}\nfn b();\nfn c<'a>(x: &'a str) { let r = r#\"}\"#; }\n";
    assert_eq!(
        functions(src),
        vec![(1, "a".to_string(), 6), (8, "c".to_string(), 1)]
    );
}
