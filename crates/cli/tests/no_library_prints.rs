//! No library crate writes to stdout or stderr except through a writer it
//! is given: their lines for people go to `collbench_core::diag` (the
//! console the binary installs), their results are returned or written to
//! a given writer. Only crates/cli prints. A line-based scan of every
//! other crate's `src/`, up to the file's first `#[cfg(test)]` (tests may
//! print), comments left out.

mod common;

use common::rust_files;
use std::path::Path;

/// What writes to the process's own streams.
const PRINTS: [&str; 8] = [
    "println!",
    "eprintln!",
    "print!",
    "eprint!",
    "io::stdout",
    "io::stderr",
    "stdout()",
    "stderr()",
];

/// `file:line: text` for each print in the non-test code of `text`.
fn prints(file: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .take_while(|(_, l)| !l.contains("#[cfg(test)]"))
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .filter(|(_, l)| PRINTS.iter().any(|p| l.contains(p)))
        .map(|(i, l)| format!("{file}:{}: {}", i + 1, l.trim()))
        .collect()
}

#[test]
fn library_crates_do_not_print() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let dir = entry.unwrap().path();
        if dir.file_name().is_some_and(|n| n == "cli") || !dir.join("src").is_dir() {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for f in files {
            let name = f.strip_prefix(&crates).unwrap().display().to_string();
            found.extend(prints(&name, &std::fs::read_to_string(&f).unwrap()));
        }
    }
    assert!(
        found.is_empty(),
        "library code writes to stdout/stderr itself (use collbench_core::diag, or return the text / take a writer):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_prints_and_skips_tests_and_comments() {
    let text = "fn a() {\n    eprintln!(\"x\");\n    // println!(\"y\");\n}\n#[cfg(test)]\nmod tests { fn b() { println!(); } }\n";
    assert_eq!(prints("f.rs", text), ["f.rs:2: eprintln!(\"x\");"]);
}
