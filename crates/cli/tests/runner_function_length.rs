//! No function in crates/runner (read from the CLI's tests, beside the
//! other source scans) is longer than 80 lines (from its `fn`
//! line to the closing brace), so that each reads on one screen: a long
//! one is split along its seams. The scanner is rough on purpose: it counts
//! braces outside comments, strings and character literals.

mod common;

use common::rust_files;
use std::path::Path;

const MAX_LINES: usize = 80;

/// The text with comments, strings and character literals blanked (lines
/// kept), so that only code braces count.
fn code_only(src: &str) -> Vec<u8> {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if rest.starts_with(b"/*") {
            let end = src[i + 2..].find("*/").map_or(b.len(), |p| i + 2 + p + 2);
            blank(&mut out, i, end);
            i = end;
        } else if let Some(hashes) = raw_string_start(rest) {
            let close = format!("\"{}", "#".repeat(hashes));
            let body = i + 2 + hashes;
            let end = src[body..]
                .find(&close)
                .map_or(b.len(), |p| body + p + close.len());
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i, (j + 1).min(b.len()));
            i = j + 1;
        } else if b[i] == b'\'' {
            // A character literal ('{', '\'', '\u{7b}'), not a lifetime.
            let len = match rest.get(1) {
                Some(b'\\') => rest[2..].iter().position(|&c| c == b'\'').map(|p| p + 3),
                Some(_) if rest.get(2) == Some(&b'\'') => Some(3),
                _ => None,
            };
            match len {
                Some(n) => {
                    blank(&mut out, i, i + n);
                    i += n;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// `r"`, `r#"`, ... at the start of `rest`: the number of `#`s.
fn raw_string_start(rest: &[u8]) -> Option<usize> {
    if rest.first() != Some(&b'r') {
        return None;
    }
    let hashes = rest[1..].iter().take_while(|&&c| c == b'#').count();
    (rest.get(1 + hashes) == Some(&b'"')).then_some(hashes)
}

/// Each function as (line of `fn`, name, lines from `fn` to its closing
/// brace). A `fn` without a body (a trait's declaration) has none.
fn functions(src: &str) -> Vec<(usize, String, usize)> {
    let code = code_only(src);
    let text = String::from_utf8_lossy(&code);
    let line_of = |pos: usize| text[..pos].matches('\n').count() + 1;
    let mut found = Vec::new();
    let bytes = text.as_bytes();
    let mut search = 0;
    while let Some(p) = text[search..].find("fn ") {
        let at = search + p;
        search = at + 3;
        let word_start =
            at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        if !word_start {
            continue;
        }
        let name: String = text[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body opens at the first `{` before any `;` (a declaration).
        let Some(open) = text[at..].find(['{', ';']).map(|q| at + q) else {
            continue;
        };
        if bytes[open] == b';' {
            continue;
        }
        let mut depth = 0usize;
        let mut close = None;
        for (k, &c) in bytes[open..].iter().enumerate() {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(open + k);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(close) = close else { continue };
        let first = line_of(at);
        found.push((first, name, line_of(close) - first + 1));
    }
    found
}

#[test]
fn no_runner_function_is_over_80_lines() {
    let runner = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runner");
    let src = runner.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut long = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let shown = path
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap()
            .display()
            .to_string();
        for (line, name, lines) in functions(&text) {
            if lines > MAX_LINES {
                long.push(format!("{shown}:{line}: fn {name} is {lines} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_LINES} lines (split them along their seams):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_scanner_counts_code_braces_only() {
    let src = "fn a() {\n    let s = \"}}\";\n    // }\n    let c = '{';\n    /* { */\n}\nfn b();\nfn c<'a>(x: &'a str) { let r = r#\"}\"#; }\n";
    assert_eq!(
        functions(src),
        vec![(1, "a".to_string(), 6), (8, "c".to_string(), 1)]
    );
}
