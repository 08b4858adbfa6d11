//! The README's flag tables say what `--help` says: `run`'s table of
//! nccl-tests flags plus its paragraph of collbench's own flags hold
//! exactly the flags of `run --help`, and the table of the other commands'
//! flags is generated from their parsers (paste it from the failure).

use crate::Cli;
use clap::CommandFactory;
use std::collections::BTreeSet;

const README: &str = include_str!("../../../README.md");

/// A command's visible flags as the README spells them: `-b/--minbytes`,
/// or `--force` when there is no short name. Help and version are every
/// command's and left out.
fn flags(cmd: &clap::Command) -> Vec<String> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .map(|a| match (a.get_short(), a.get_long()) {
            (Some(s), Some(l)) => format!("-{s}/--{l}"),
            (None, Some(l)) => format!("--{l}"),
            (Some(s), None) => format!("-{s}"),
            (None, None) => a.get_id().to_string(),
        })
        .collect()
}

/// Every command below `cmd` that takes flags, with its path (`gen slurm`).
fn commands(cmd: &clap::Command, path: &str, out: &mut Vec<(String, Vec<String>)>) {
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("{path} {}", sub.get_name()).trim().to_string();
        let own = flags(sub);
        if !sub.has_subcommands() || !own.is_empty() {
            out.push((name.clone(), own));
        }
        if sub.has_subcommands() {
            commands(sub, &name, out);
        }
    }
}

/// The flag spellings in `text` (`-b/--minbytes`, `--force`).
fn spelled(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("--") {
        let start = i + at;
        let mut end = start + 2;
        while end < bytes.len()
            && (bytes[end].is_ascii_alphanumeric() || b"_-".contains(&bytes[end]))
        {
            end += 1;
        }
        let long = &text[start..end];
        let short = (start >= 3 && bytes[start - 1] == b'/' && bytes[start - 3] == b'-')
            .then(|| &text[start - 3..start]);
        if text[start + 2..end].starts_with(|c: char| c.is_ascii_alphabetic()) {
            out.insert(format!("{}{long}", short.unwrap_or("")));
        }
        i = end;
    }
    out
}

/// The section of the README from `start` to the next blank line.
fn section<'a>(start: &str) -> &'a str {
    let at = README
        .find(start)
        .unwrap_or_else(|| panic!("README lacks {start:?}"));
    let rest = &README[at..];
    &rest[..rest.find("\n\n").unwrap_or(rest.len())]
}

/// The README's table of the other commands' flags, as it must read.
fn others_table() -> String {
    let mut all = Vec::new();
    commands(&Cli::command(), "", &mut all);
    let mut out = String::from("| command | flags |\n| --- | --- |\n");
    for (name, flags) in all.iter().filter(|(n, _)| n != "run") {
        let cell = if flags.is_empty() {
            "none".to_string()
        } else {
            flags
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        out += &format!("| `{name}` | {cell} |\n");
    }
    out
}

#[test]
fn run_help_and_the_readme_name_the_same_flags() {
    let cli = Cli::command();
    let run = cli.find_subcommand("run").unwrap();
    let help: BTreeSet<String> = flags(run).into_iter().collect();
    let mut readme = spelled(section("| flag | meaning |"));
    readme.extend(spelled(section("collbench's own flags:")));
    readme.remove("-h/--help");
    let missing: Vec<_> = help.difference(&readme).collect();
    let stale: Vec<_> = readme.difference(&help).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "README's run flags differ from `run --help`: missing {missing:?}, not in help {stale:?}"
    );
}

#[test]
fn the_readme_lists_every_other_commands_flags() {
    let table = others_table();
    assert!(
        README.contains(&table),
        "README.md's table of the other commands' flags differs from their --help (paste this in):\n{table}"
    );
}

/// Help is for users: no Rust paths (`exit::RUN`) or doc links
/// (`` [`nccl_tests_json`] ``) leak from doc comments into it, and `run`
/// names every collective.
#[test]
fn help_shows_no_code_names() {
    fn walk(cmd: &mut clap::Command, path: &str) {
        let help = cmd.render_long_help().to_string();
        for leak in ["::", "[`", "`]"] {
            assert!(
                !help.contains(leak),
                "`{path} --help` shows {leak:?}:\n{help}"
            );
        }
        let names: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        for name in names {
            let sub = cmd.find_subcommand_mut(&name).unwrap();
            walk(sub, &format!("{path} {name}"));
        }
    }
    let mut cli = Cli::command();
    cli.build();
    walk(&mut cli, "collbench");
    let run = cli
        .find_subcommand_mut("run")
        .unwrap()
        .render_long_help()
        .to_string();
    for c in collbench_core::Collective::ALL {
        assert!(run.contains(c.name()), "run --help omits {}", c.name());
    }
}
