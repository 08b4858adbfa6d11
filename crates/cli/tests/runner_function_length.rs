//! No function of any crate of the workspace (read from the CLI's tests,
//! beside the other source scans) is longer than 80 lines (from its `fn`
//! line to the closing brace), and no source file is longer than 600
//! lines, so that each reads on one screen and each file holds one job: a
//! long one is split along its seams (issue #43 brought the last crates,
//! check, doctor, gen, output and report, under both). The scanner is
//! rough on purpose: it counts braces outside comments, strings and
//! character literals.

mod common;

use common::source::{crate_names, crate_sources, functions};

const MAX_LINES: usize = 80;
const MAX_FILE_LINES: usize = 600;

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
            if lines > MAX_LINES {
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
fn no_function_is_over_80_lines() {
    let long: Vec<String> = crate_names().iter().flat_map(|k| too_long(k).0).collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_LINES} lines (split them along their seams):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_file_is_over_600_lines() {
    let long: Vec<String> = crate_names().iter().flat_map(|k| too_long(k).1).collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them along their seams):\n{}",
        long.join("\n")
    );
}

/// The scan reads every crate's sources (a path change that hid them would
/// pass every crate vacuously).
#[test]
fn every_crate_has_sources_scanned() {
    let names = crate_names();
    assert!(names.len() >= 13, "{names:?}");
    for k in &names {
        assert!(!crate_sources(k).is_empty(), "{k}: no sources found");
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
