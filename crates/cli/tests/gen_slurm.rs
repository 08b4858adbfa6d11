//! End to end on a real (local) Slurm: `collbench gen slurm` writes a script
//! for 2 nodes x 2 tasks running `collbench preflight`, `sbatch --wait` runs
//! it, and the job's log shows 4 ranks on 2 hosts.
//!
//! Gated on COLLBENCH_SLURM_TESTS=1 (start Slurm first: `ci/slurm-setup.sh`);
//! when it is set and `sbatch` is missing, the test fails rather than skips.

mod common;

use std::path::Path;
use std::process::Command;

fn enabled() -> bool {
    std::env::var("COLLBENCH_SLURM_TESTS").as_deref() == Ok("1")
}

/// The job's folder `<results>/<job-name>-<job-id>/` as the script names it.
fn job_dir(results: &Path, job_name: &str, sbatch_stdout: &str) -> std::path::PathBuf {
    let job_id = sbatch_stdout
        .split_whitespace()
        .last()
        .unwrap_or_else(|| panic!("no job id in {sbatch_stdout:?}"));
    results.join(format!("{job_name}-{job_id}"))
}

#[test]
fn sbatch_runs_generated_preflight_on_2_nodes_x_2_tasks() {
    if !enabled() {
        eprintln!("skipped: set COLLBENCH_SLURM_TESTS=1 (after ci/slurm-setup.sh)");
        return;
    }
    if Command::new("sbatch").arg("--version").output().is_err() {
        panic!("COLLBENCH_SLURM_TESTS=1 but sbatch is missing: run ci/slurm-setup.sh");
    }
    let bin = env!("CARGO_BIN_EXE_collbench");
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let script = dir.path().join("job.sh");
    let job_name = "gen-e2e";

    let gen = Command::new(bin)
        .args(["gen", "slurm", "--nodes", "2", "--gpus-per-node", "2"])
        .args([
            "--container-runtime",
            "none",
            "--job-name",
            job_name,
            "--time",
            "00:05:00",
        ])
        .arg("--collbench")
        .arg(bin)
        .arg("--output-dir")
        .arg(&results)
        .arg("-o")
        .arg(&script)
        .args(["--", "preflight"])
        .output()
        .unwrap();
    common::ok_stdout(gen, "gen slurm");

    // --wait returns the job's exit code; --time above bounds a hang.
    let sbatch = Command::new("sbatch")
        .arg("--wait")
        .arg("--chdir")
        .arg(dir.path())
        .arg(&script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&sbatch.stdout).to_string();
    let job = job_dir(&results, job_name, &stdout);
    let log = std::fs::read_to_string(job.join("collbench.log")).unwrap_or_default();
    let slurm_out = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".out"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect::<String>();
    let context = format!(
        "sbatch: {stdout}{}\n--- job output:\n{slurm_out}\n--- script:\n{}",
        String::from_utf8_lossy(&sbatch.stderr),
        std::fs::read_to_string(&script).unwrap()
    );
    assert!(sbatch.status.success(), "job failed\n{context}");

    // The preflight verdict, and ranks on both emulated nodes n1 and n2.
    assert!(
        log.contains("PASS: 4 ranks on 2 hosts"),
        "no PASS verdict\n{context}"
    );
    for host in ["n1", "n2"] {
        assert!(log.contains(host), "no rank on {host}\n{context}");
    }
}
