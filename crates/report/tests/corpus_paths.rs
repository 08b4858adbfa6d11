//! The path NCCL took, read from every real log of the corpus that holds
//! NCCL's INFO lines (`tests/corpus/*/*.expect.toml` with an `[nccl]`
//! section, see `tests/corpus/README.md`), through the same reader
//! `collbench report` uses. Every mismatch of every log is listed at once.

use collbench_core::nccl_path::NcclPath;
use collbench_report::parse::read_file;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// Every log with its expectation's `[nccl]` table.
fn logs_with_paths() -> Vec<(PathBuf, toml::Table)> {
    let mut out = Vec::new();
    let Ok(folders) = std::fs::read_dir(corpus()) else {
        return out;
    };
    for folder in folders.flatten().filter(|f| f.path().is_dir()) {
        for entry in std::fs::read_dir(folder.path()).unwrap().flatten() {
            let p = entry.path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            let Some(stem) = name.strip_suffix(".expect.toml") else {
                continue;
            };
            let text = std::fs::read_to_string(&p).unwrap();
            let expect: toml::Table =
                toml::from_str(&text).unwrap_or_else(|e| panic!("{}: not TOML: {e}", p.display()));
            let Some(toml::Value::Table(nccl)) = expect.get("nccl") else {
                continue;
            };
            let log = ["txt", "log", "json", "out"]
                .iter()
                .map(|ext| folder.path().join(format!("{stem}.{ext}")))
                .find(|l| l.exists())
                .unwrap_or_else(|| panic!("{}: no log beside it", p.display()));
            out.push((log, nccl.clone()));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn strings(v: &toml::Value) -> BTreeSet<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// What differs between the log's path and its expectation.
fn mismatches(path: &NcclPath, want: &toml::Table) -> Vec<String> {
    let mut out = Vec::new();
    let check = |key: &str, have: String, want: String| {
        (have != want).then(|| format!("{key}: read {have}, expected {want}"))
    };
    for (key, value) in want {
        match key.as_str() {
            "version" => out.extend(check(
                key,
                format!("{:?}", path.version.as_deref()),
                format!("{:?}", value.as_str()),
            )),
            "net" => out.extend(check(
                key,
                format!("{:?}", path.net.as_deref()),
                format!("{:?}", value.as_str()),
            )),
            "gdr" => out.extend(check(
                key,
                format!("{:?}", path.gdr),
                format!("{:?}", value.as_bool()),
            )),
            "nvls" => out.extend(check(
                key,
                format!("{:?}", path.nvls),
                format!("{:?}", value.as_bool()),
            )),
            "transports" => {
                let have: BTreeSet<String> = path
                    .transports
                    .iter()
                    .map(|t| t.name().to_string())
                    .collect();
                out.extend(check(
                    key,
                    format!("{have:?}"),
                    format!("{:?}", strings(value)),
                ));
            }
            "p2p_kinds" => out.extend(check(
                key,
                format!("{:?}", path.p2p_kinds),
                format!("{:?}", strings(value)),
            )),
            "nics" => {
                let have: BTreeSet<String> = path.nics.iter().cloned().collect();
                out.extend(check(
                    key,
                    format!("{have:?}"),
                    format!("{:?}", strings(value)),
                ));
            }
            "cause_kinds" => {
                let have: BTreeSet<String> = path
                    .causes
                    .iter()
                    .filter_map(|c| serde_json::to_value(c.kind).ok())
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect();
                let want = strings(value);
                if !want.is_subset(&have) {
                    out.push(format!(
                        "cause_kinds: read {have:?}, expected {want:?} among them"
                    ));
                }
            }
            "cause" => {
                let want = value.as_str().unwrap_or_default();
                if !path.causes.iter().any(|c| c.evidence.contains(want)) {
                    out.push(format!(
                        "cause: none of {:?} holds {want:?}",
                        path.causes.iter().map(|c| &c.evidence).collect::<Vec<_>>()
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn every_corpus_log_is_read_to_the_path_nccl_took() {
    let logs = logs_with_paths();
    let mut failures = Vec::new();
    for (log, want) in &logs {
        let name = log.strip_prefix(corpus()).unwrap().display().to_string();
        let path = match read_file(log, None) {
            Ok(p) => p.records.iter().find_map(|r| r.nccl_path.clone()),
            // A log refused on purpose (its table is unreadable) still has
            // NCCL's lines: read them as `compare` explains a change.
            Err(e) => {
                failures.push(format!("{name}: refused: {e}"));
                continue;
            }
        };
        let Some(path) = path else {
            failures.push(format!("{name}: no NCCL path read"));
            continue;
        };
        for m in mismatches(&path, want) {
            failures.push(format!("{name}: {m}"));
        }
    }
    eprintln!("{} logs with NCCL INFO lines", logs.len());
    assert!(
        failures.is_empty(),
        "{} of {} logs read wrong:\n{}",
        failures.len(),
        logs.len(),
        failures.join("\n")
    );
}
