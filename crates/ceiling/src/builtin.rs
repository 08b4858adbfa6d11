//! The topology files of `topologies/`, built into the binary so that
//! `collbench expect --topology gke-a3-mega` works wherever collbench was
//! installed (the wheel and the images carry no `topologies/` folder).

use crate::fabric::HostFabric;
use crate::file::{self, FileError};
use collbench_core::Topology;
use std::path::Path;

/// (name, TOML text) of every file in `topologies/`.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "gke-a3-high",
        include_str!("../../../topologies/gke-a3-high.toml"),
    ),
    (
        "gke-a3-mega",
        include_str!("../../../topologies/gke-a3-mega.toml"),
    ),
    (
        "gke-a3-ultra",
        include_str!("../../../topologies/gke-a3-ultra.toml"),
    ),
    ("gke-a4", include_str!("../../../topologies/gke-a4.toml")),
    ("gke-a4x", include_str!("../../../topologies/gke-a4x.toml")),
    ("h200x2", include_str!("../../../topologies/h200x2.toml")),
    (
        "volcengine-ebmhpcpni2",
        include_str!("../../../topologies/volcengine-ebmhpcpni2.toml"),
    ),
    (
        "volcengine-ebmhpcpni2l",
        include_str!("../../../topologies/volcengine-ebmhpcpni2l.toml"),
    ),
    (
        "volcengine-ebmhpcpni3l",
        include_str!("../../../topologies/volcengine-ebmhpcpni3l.toml"),
    ),
    (
        "volcengine-hpcpni3ln",
        include_str!("../../../topologies/volcengine-hpcpni3ln.toml"),
    ),
];

/// The names of the built-in topologies, comma-separated, for messages.
pub fn names() -> String {
    BUILTIN
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The topology `arg` names: a file where one is there, else a built-in of
/// that name (a bare word, no `/`), else the file's read error, which
/// lists the built-ins when `arg` could have been one.
pub fn load(arg: &Path) -> Result<Topology, FileError> {
    load_machine(arg).map(|(t, _)| t)
}

/// [`load`] with the description's `[pcie]` table ([`HostFabric`]).
pub fn load_machine(arg: &Path) -> Result<(Topology, HostFabric), FileError> {
    if arg.exists() {
        return file::load_machine(arg);
    }
    let name = arg.to_str().filter(|s| !s.contains('/'));
    let name = name.map(|s| s.strip_suffix(".toml").unwrap_or(s));
    match name.and_then(|n| BUILTIN.iter().find(|(b, _)| *b == n)) {
        Some((n, text)) => file::parse_machine_named(text, n),
        None if name.is_some() => Err(FileError::Unknown {
            name: arg.display().to_string(),
            builtins: names(),
        }),
        None => file::load_machine(arg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_parses() {
        for (name, text) in BUILTIN {
            file::parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    /// A file added to topologies/ without a line here would be missing
    /// from installed binaries.
    #[test]
    fn every_file_of_topologies_is_built_in() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".toml").map(str::to_string)
            })
            .collect();
        files.sort();
        let mut builtin: Vec<String> = BUILTIN.iter().map(|(n, _)| n.to_string()).collect();
        builtin.sort();
        assert_eq!(files, builtin);
    }

    #[test]
    fn a_name_finds_the_builtin_and_an_unknown_one_lists_them() {
        let t = load(Path::new("h200x2")).unwrap();
        assert_eq!(t.gpu.unwrap().count, 2);
        assert!(load(Path::new("gke-a4.toml")).is_ok());
        let e = load(Path::new("h100x9")).unwrap_err().to_string();
        assert!(e.contains("h100x9") && e.contains("gke-a3-mega"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        // A path that is not there stays a read error.
        let e = load(Path::new("no/such/dir.toml")).unwrap_err();
        assert!(matches!(e, FileError::Read { .. }), "{e}");
    }
}
