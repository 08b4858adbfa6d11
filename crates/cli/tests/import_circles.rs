//! No two files of a crate import each other in a circle (A uses B and B
//! uses A, directly or through a chain of `use crate::...`, `use
//! super::...` and inline `crate::x::` paths): a circle is a type in the
//! wrong file, and it makes a reader go back to a file already left.
//! Every crate of the workspace is held to none (issue #43 broke the last
//! ones, in check's host tests and report's input/parse).

mod common;

use common::source::{circles, crate_names, import_circles};
use std::collections::{BTreeMap, BTreeSet};

#[test]
fn no_import_circle_between_files() {
    let mut found = Vec::new();
    for krate in crate_names() {
        for c in import_circles(&krate) {
            found.push(format!("{krate}: {}", c.join(" <-> ")));
        }
    }
    assert!(
        found.is_empty(),
        "import circles between files (move the shared type to the file it belongs to):\n{}",
        found.join("\n")
    );
}

/// The scan sees the whole workspace (a rename that hid a crate from it
/// would pass every crate vacuously).
#[test]
fn every_crate_is_scanned() {
    let names = crate_names();
    for krate in ["check", "cli", "core", "nccl", "report", "runner", "tune"] {
        assert!(
            names.iter().any(|n| n == krate),
            "{krate} missing from {names:?}"
        );
    }
}

fn graph(edges: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, b) in edges {
        g.entry(a.to_string()).or_default().insert(b.to_string());
        g.entry(b.to_string()).or_default();
    }
    g
}

#[test]
fn a_circle_is_found_through_a_chain_and_a_line_is_not_one() {
    let chain = graph(&[
        ("a.rs", "b.rs"),
        ("b.rs", "c.rs"),
        ("c.rs", "a.rs"),
        ("c.rs", "d.rs"),
    ]);
    assert_eq!(circles(&chain), vec![vec!["a.rs", "b.rs", "c.rs"]]);
    let line = graph(&[("a.rs", "b.rs"), ("b.rs", "c.rs"), ("a.rs", "c.rs")]);
    assert!(circles(&line).is_empty());
}
