//! Run metadata for records: command line, the environment variables that
//! shape results, start time.

use collbench_core::Record;
use std::collections::BTreeMap;

/// Variable prefixes recorded with results. Never the whole environment:
/// it can hold secrets (COLLBENCH_TOKEN is left out on purpose).
const RECORDED: [&str; 6] = [
    "NCCL_",
    "CUDA_",
    "NVIDIA_",
    "SLURM_JOB_ID",
    "COLLBENCH_",
    "UCX_",
];

/// The recorded subset of `vars`.
pub fn recorded_env(vars: impl Iterator<Item = (String, String)>) -> BTreeMap<String, String> {
    vars.filter(|(k, _)| RECORDED.iter().any(|p| k.starts_with(p)))
        .filter(|(k, _)| k != "COLLBENCH_TOKEN")
        .collect()
}

/// A record with this run's metadata filled in.
pub fn new_record(argv: &[String]) -> Record {
    let mut r = Record::new("collbench");
    r.tool_version = Some(env!("CARGO_PKG_VERSION").to_string());
    r.command_line = argv.to_vec();
    // NCCL_DEBUG* set by collbench for its private capture of NCCL's
    // lines are not the user's settings.
    let own = collbench_nccl::path_capture::own_variables();
    r.env = recorded_env(std::env::vars().filter(|(k, _)| !own.contains(&k.as_str())));
    r.start_time = Some(utc_now_rfc3339());
    r
}

/// Current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now_rfc3339() -> String {
    let (d, t) = utc_now_parts();
    format!("{d}T{t}Z")
}

/// Current UTC time as `YYYY-MM-DD HH:MM:SS` (the `-S` column).
pub fn utc_now_stamp() -> String {
    let (d, t) = utc_now_parts();
    format!("{d} {t}")
}

fn utc_now_parts() -> (String, String) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    collbench_core::clock::utc_parts(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_filter_keeps_what_matters_only() {
        let vars = [
            ("NCCL_NVLS_ENABLE", "0"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            ("HOME", "/root"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("COLLBENCH_TOKEN", "secret"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let e = recorded_env(vars.into_iter());
        assert_eq!(
            e.keys().collect::<Vec<_>>(),
            ["CUDA_VISIBLE_DEVICES", "NCCL_NVLS_ENABLE"]
        );
    }

    #[test]
    fn date_format() {
        let s = utc_now_rfc3339();
        assert_eq!(s.len(), 20);
        assert!(s.starts_with("20"));
    }
}
