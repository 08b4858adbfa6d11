//! Issue 18 item 11: a green `cargo nextest run` says what it did not test.
//! Every test that returns early (printing "skipped: set" and its switch) when its
//! service is missing is left out by the default profile's filter (nextest
//! counts it as skipped), the `ci` profile runs everything, `.ci/run` picks
//! that profile and installs nextest, and the README says how to get it.

use std::path::Path;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(rel)).unwrap()
}

/// What a gated test prints when its switch is unset (split so that this
/// file does not match itself).
const MARK: &str = concat!("skipped: set ", "COLLBENCH_");

/// The binary ids of every test file with a gated test.
fn gated_tests() -> Vec<String> {
    let mut found = Vec::new();
    for krate in std::fs::read_dir(Path::new(ROOT).join("crates")).unwrap() {
        let krate = krate.unwrap().path();
        let Ok(files) = std::fs::read_dir(krate.join("tests")) else {
            continue;
        };
        for file in files {
            let file = file.unwrap().path();
            if file.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            if !text.contains(MARK) {
                continue;
            }
            let id = format!(
                "collbench-{}::{}",
                krate.file_name().unwrap().to_string_lossy(),
                file.file_stem().unwrap().to_string_lossy()
            );
            found.push(id);
        }
    }
    found.sort();
    found
}

#[test]
fn service_gated_tests_are_skipped_by_default_and_run_by_ci() {
    let config = read(".config/nextest.toml");
    let default = config
        .split("[profile.ci]")
        .next()
        .unwrap()
        .split("default-filter")
        .nth(1)
        .expect("profile.default has a default-filter");
    let gated = gated_tests();
    assert!(gated.len() >= 4, "{gated:?}");
    for id in &gated {
        assert!(
            default.contains(&format!("binary_id({id})")),
            "{id} has tests gated on a COLLBENCH_*_TESTS switch: leave them out in .config/nextest.toml's default-filter"
        );
    }
    let ci = config.split("[profile.ci]").nth(1).expect("a ci profile");
    assert!(ci.contains("default-filter = \"all()\""), "{ci}");

    let run = read(".ci/run");
    assert!(run.contains("export NEXTEST_PROFILE=ci"), "{run}");
    assert!(
        run.contains("command -v cargo-nextest >/dev/null || cargo install cargo-nextest --locked"),
        "{run}"
    );
    // The README's test command needs Rust alone (`cargo test`); it
    // still says how CI gets nextest.
    let readme = read("README.md");
    assert!(
        readme.contains("```sh\ncargo test\n```"),
        "README's test command"
    );
    assert!(readme
        .replace('\n', " ")
        .contains("cargo install cargo-nextest --locked"));
}
