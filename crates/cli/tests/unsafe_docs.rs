//! Every `unsafe fn` in the workspace says what its caller must uphold (a
//! `# Safety` section in its doc comment), and the MPI backend, the crate
//! that calls C the most, makes each unsafe operation inside a function
//! explicit (`unsafe_op_in_unsafe_fn` denied). Issue #52.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `unsafe fn` declarations (not calls or types) whose doc comment has no
/// `# Safety` section, as `path:line`.
fn undocumented(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        let decl = t.starts_with("unsafe fn ") || t.starts_with("unsafe extern \"C\" fn ");
        if !decl {
            continue;
        }
        let doc = lines[..i]
            .iter()
            .rev()
            .take_while(|l| l.trim_start().starts_with("///") || l.trim_start().starts_with("#["))
            .any(|l| l.contains("# Safety"));
        if !doc {
            out.push(i + 1);
        }
    }
    out
}

#[test]
fn every_unsafe_fn_has_a_safety_section() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for c in std::fs::read_dir(&crates).unwrap().flatten() {
        let src = c.path().join("src");
        if src.is_dir() {
            sources(&src, &mut files);
        }
    }
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for line in undocumented(&text) {
            bad.push(format!("{}:{line}", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "unsafe fn without a # Safety section:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_sees_an_undocumented_unsafe_fn() {
    let text =
        "/// Does a thing.\nunsafe fn f() {}\n/// # Safety\n/// None.\npub unsafe fn g() {}\n";
    assert_eq!(undocumented(text), [2]);
}

#[test]
fn the_mpi_backend_denies_unsafe_ops_outside_unsafe_blocks() {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpi/src/lib.rs");
    let text = std::fs::read_to_string(lib).unwrap();
    assert!(text.contains("#![deny(unsafe_op_in_unsafe_fn)]"));
}
