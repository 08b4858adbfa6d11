//! Every command of the README's "Install" section is one CI runs: the
//! words of each line of its `sh` blocks appear in that order in a line of
//! `.ci/run`, `ci/install.sh` or `ci/image.sh` (CI may add arguments, such
//! as its local base image), so the instructions cannot drift from what is
//! tested.

use std::path::Path;

fn read(rel: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The command lines of the `sh` blocks in `## Install`.
fn install_commands(readme: &str) -> Vec<String> {
    let start = readme
        .find("\n## Install\n")
        .expect("README has ## Install");
    let section = &readme[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut commands = Vec::new();
    let mut in_sh = false;
    for line in section.lines() {
        match (in_sh, line.trim()) {
            (false, "```sh") => in_sh = true,
            (true, "```") => in_sh = false,
            (true, cmd) if !cmd.is_empty() => commands.push(cmd.to_string()),
            _ => {}
        }
    }
    commands
}

#[test]
fn ci_runs_every_install_command_of_the_readme() {
    let commands = install_commands(&read("README.md"));
    assert!(commands.len() >= 8, "{commands:#?}");
    let ci: Vec<String> = [".ci/run", "ci/install.sh", "ci/image.sh"]
        .iter()
        .flat_map(|f| {
            read(f)
                .lines()
                .map(|l| l.trim().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    for cmd in &commands {
        assert!(
            ci.iter().any(|l| runs(l, cmd)),
            "README's `{cmd}` is run by no CI script"
        );
    }
}

/// Whether CI line `line` runs README command `cmd`: same first word, and
/// every word of `cmd` in order among `line`'s.
fn runs(line: &str, cmd: &str) -> bool {
    let mut words = line.split_whitespace();
    let mut wanted = cmd.split_whitespace();
    if words.next() != wanted.next() {
        return false;
    }
    wanted.all(|w| words.any(|l| l == w))
}

#[test]
fn an_added_argument_is_allowed_a_missing_or_moved_one_is_not() {
    let cmd = "buildah bud -f F -t x ctx";
    assert!(runs("buildah bud --isolation chroot -f F -t x ctx", cmd));
    assert!(!runs("buildah bud -f F ctx", cmd));
    assert!(!runs("buildah bud -t x -f F ctx", cmd));
    assert!(!runs("echo buildah bud -f F -t x ctx", cmd));
}
