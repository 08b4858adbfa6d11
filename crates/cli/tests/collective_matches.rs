//! Where a collective's behaviour is decided (the ceiling model, the
//! runner and its CPU backend, the printers), a `match` over `Collective`
//! names every collective: no `_ =>` arm, so that a new collective is a
//! compile error at each place that must be taught it, not a silent ring
//! ceiling (issue #52). The scan is rough on purpose, like the other
//! source scans: it reads each `match`'s arms at their own depth, after
//! comments and strings are blanked.

mod common;

use common::source::{code_only, crate_sources, matching_close};

/// The crates whose matches over `Collective` must be exhaustive.
const CRATES: [&str; 3] = ["ceiling", "runner", "output"];

/// The arms of a match body (the text between its braces) as their
/// patterns, guards left out: nested blocks are skipped, so only this
/// match's own arms count.
fn arm_patterns(body: &[u8]) -> Vec<String> {
    // The body at its own depth: nested `{...}` kept as `{}`.
    let mut flat = Vec::new();
    let mut depth = 0usize;
    for &c in body {
        match c {
            b'{' => {
                if depth == 0 {
                    flat.push(c);
                }
                depth += 1;
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    flat.push(c);
                }
            }
            _ if depth == 0 => flat.push(c),
            _ => {}
        }
    }
    let text = String::from_utf8_lossy(&flat).into_owned();
    let mut patterns = Vec::new();
    let mut rest = text.as_str();
    while let Some(arrow) = rest.find("=>") {
        let pattern = rest[..arrow].trim();
        let pattern = match pattern.find(" if ") {
            Some(i) => pattern[..i].trim(),
            None => pattern,
        };
        patterns.push(pattern.to_string());
        rest = skip_arm_expression(&rest[arrow + 2..]);
    }
    patterns
}

/// The text after one arm's expression: a `{}` block (and its optional
/// comma), else up to the first comma outside parentheses and brackets.
fn skip_arm_expression(expr: &str) -> &str {
    let trimmed = expr.trim_start();
    if let Some(after) = trimmed.strip_prefix("{}") {
        let after = after.trim_start();
        return after.strip_prefix(',').unwrap_or(after);
    }
    let mut depth = 0i32;
    for (i, c) in expr.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => return &expr[i + 1..],
            _ => {}
        }
    }
    ""
}

/// Each `match` over `Collective` in `src` with a `_ =>` arm, as the line
/// of its `match`.
fn wildcard_matches(src: &str) -> (usize, Vec<usize>) {
    let code = code_only(src);
    let text = String::from_utf8_lossy(&code).into_owned();
    let bytes = text.as_bytes();
    let (mut over_collective, mut wildcard) = (0, Vec::new());
    let mut search = 0;
    while let Some(p) = text[search..].find("match ") {
        let at = search + p;
        search = at + 6;
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let Some(open) = text[at..].find('{').map(|q| at + q) else {
            continue;
        };
        let Some(close) = matching_close(bytes, open) else {
            continue;
        };
        let patterns = arm_patterns(&bytes[open + 1..close]);
        if patterns.iter().any(|p| p.contains("Collective::")) {
            over_collective += 1;
            if patterns.iter().any(|p| p == "_") {
                wildcard.push(text[..at].matches('\n').count() + 1);
            }
        }
    }
    (over_collective, wildcard)
}

#[test]
fn no_match_over_collective_ends_in_a_wildcard() {
    let mut found = Vec::new();
    let mut scanned = 0;
    for krate in CRATES {
        for path in crate_sources(krate) {
            let src = std::fs::read_to_string(&path).unwrap();
            let (n, lines) = wildcard_matches(&src);
            scanned += n;
            let shown = path
                .strip_prefix(common::source::crates_dir())
                .unwrap()
                .display()
                .to_string();
            found.extend(lines.into_iter().map(|l| format!("{shown}:{l}")));
        }
    }
    // The scan sees the model's, the CPU backend's and the printers'
    // matches (a path change that hid them would pass vacuously).
    assert!(scanned >= 5, "only {scanned} matches over Collective seen");
    assert!(
        found.is_empty(),
        "matches over Collective with a `_ =>` arm (name every collective, so a new one is a compile error here):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scanner_sees_a_wildcard_arm_and_only_its_own_arms() {
    let src = "fn f(op: Collective) -> u32 {\n    match op {\n        Collective::AllReduce => { match x { _ => 1 } }\n        Collective::Reduce if y => 2,\n        _ => 3,\n    }\n}\n";
    assert_eq!(wildcard_matches(src), (1, vec![2]));
    let exhaustive = "match op {\n    Collective::AllReduce | Collective::Reduce => f(a, b),\n    Collective::Gather => Bound { gbps: 1.0, by: x },\n    Collective::Scatter => { \"_ =>\" }\n}\nmatch n { 1 => 2, _ => 3 }\n";
    assert_eq!(wildcard_matches(exhaustive), (1, vec![]));
}
