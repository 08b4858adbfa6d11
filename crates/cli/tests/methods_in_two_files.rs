//! A type's state lives with its methods (issue #52): the inherent
//! methods of one type (its `impl Type { ... }` blocks, trait impls left
//! out) sit in at most two files of its crate. Spreading one type's
//! methods over many files meets the size rules while the state stays
//! one lump that every file reaches into; a type that outgrows two files
//! is split into owned parts, each a type of its own with its methods.
//! The scan is rough on purpose, like the other source scans: `impl`
//! items are read from code with comments and strings blanked, and types
//! are told apart by name within a crate.

mod common;

use common::source::{crate_names, crate_sources, crates_dir, inherent_impls};
use std::collections::{BTreeMap, BTreeSet};

const MAX_FILES: usize = 2;

/// Types still spread over more than two files, by (crate, type), each
/// with why it waits: the list only shrinks ([`the_waiting_list_is_not_stale`]
/// fails once one is split, so that its line goes).
const NOT_YET_SPLIT: [(&str, &str, &str); 0] = [];

/// For each type of crate `krate` (by name), the files of its `src/`
/// that hold an inherent `impl` of it.
fn impl_files(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut files: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in crate_sources(krate) {
        let text = std::fs::read_to_string(&path).unwrap();
        let shown = path.strip_prefix(crates_dir()).unwrap().display();
        for (_, name) in inherent_impls(&text) {
            files.entry(name).or_default().insert(shown.to_string());
        }
    }
    files
}

#[test]
fn no_type_has_methods_in_more_than_two_files() {
    let mut spread = Vec::new();
    for krate in crate_names() {
        for (name, files) in impl_files(&krate) {
            let waiting = NOT_YET_SPLIT
                .iter()
                .any(|(k, t, _)| *k == krate && *t == name);
            if files.len() > MAX_FILES && !waiting {
                let list: Vec<&str> = files.iter().map(String::as_str).collect();
                spread.push(format!(
                    "{krate}: impl {name} in {} files: {}",
                    files.len(),
                    list.join(", ")
                ));
            }
        }
    }
    assert!(
        spread.is_empty(),
        "types whose methods are spread over more than {MAX_FILES} files (split the type into owned parts, each with its methods):\n{}",
        spread.join("\n")
    );
}

/// Each type on the waiting list is still spread (a split one must leave
/// the list, or the list would hide its spreading again).
#[test]
fn the_waiting_list_is_not_stale() {
    for (krate, name, why) in NOT_YET_SPLIT {
        let files = impl_files(krate).remove(name).unwrap_or_default();
        assert!(
            files.len() > MAX_FILES,
            "{krate}: impl {name} is in {} file(s) now: take it off NOT_YET_SPLIT ({why})",
            files.len()
        );
    }
}

/// The scan finds the impls of every crate (a change that hid them would
/// pass vacuously): the NCCL backend's and the runner's at least.
#[test]
fn the_scan_sees_the_workspace_impls() {
    assert!(impl_files("nccl").contains_key("NcclBackend"));
    assert!(impl_files("runner").contains_key("Runner"));
    assert!(crate_names().len() >= 13);
}

#[test]
fn the_scanner_reads_inherent_impls_only() {
    let src = "\
impl Plain {
}
impl<'a, T: Fn() -> u8> Generic<'a, T> where T: Copy {
}
impl Display for Plain {}
impl<T> From<T> for Generic<T> {}
unsafe impl Send for Plain {}
impl super::path::Deep<'_> {}
fn f(x: impl Fn()) -> impl Iterator<Item = u8> {
    // impl InComment {
    let s = \"impl InString {\";
}
macro_rules! m { ($t:ty) => {
    impl $t {}
} }
";
    let names: Vec<(usize, String)> = inherent_impls(src);
    assert_eq!(
        names,
        vec![
            (1, "Plain".to_string()),
            (3, "Generic".to_string()),
            (8, "Deep".to_string())
        ]
    );
}
