//! nccl-tests' later flags as a user of nccl-tests 2.19.6 gives them, on
//! the CPU backend: -I/-K (per-iteration columns, nccl-tests' warnings
//! for values it cannot use), -x/-M (NCCL only: said once on stderr),
//! -D/-V (device API: refused off NCCL, -V's range warning), and repeated
//! flags, where the last value wins as with nccl-tests' getopt.

mod common;

use common::collbench;

fn run(extra: &[&str]) -> (i32, String, String) {
    let out = collbench()
        .args(["run", "all_reduce", "--backend", "cpu", "--ranks", "2"])
        .args(["-b", "1K", "-e", "4K", "-f", "2", "-w", "0", "-n", "5"])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn data_rows(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn per_iteration_timing_adds_four_columns_per_placement() {
    let (code, out, err) = run(&["-I", "1", "-K", "2"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(
        "# Per-Iteration Report: CUDA event timing; i_* uses max over process rows; summary skips first 2 iterations \n"
    ));
    assert!(out.contains("i_min    i_max    i_p99    i_cv%"));
    let rows = data_rows(&out);
    assert_eq!(rows.len(), 3);
    for r in rows {
        assert_eq!(r.len(), 21, "{r:?}");
        let min: f64 = r[9].parse().unwrap();
        let max: f64 = r[10].parse().unwrap();
        let p99: f64 = r[11].parse().unwrap();
        assert!(min > 0.0 && min <= max && p99 <= max, "{r:?}");
    }
}

#[test]
fn per_iteration_values_nccl_tests_cannot_use_warn_and_the_run_goes_on() {
    let (code, out, err) = run(&["-I", "2"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("per-iteration timing (-I) only supports 0=off or 1=on. Disabling."));
    assert!(!out.contains("i_min"));
    let (code, _, err) = run(&["-I", "1", "-K", "5"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("per-iteration skip (-K) must be between 0 and 4. Disabling."),
        "{err}"
    );
    let (code, _, err) = run(&["-K", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.")
    );
    let (code, out, err) = run(&["-I", "1", "-G", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("incompatible with CUDA graph mode (-G). Disabling."));
    assert!(!out.contains("i_min"));
}

#[test]
fn nccl_only_flags_are_accepted_and_said_once_on_the_cpu_backend() {
    let (code, out, err) = run(&["-x", "1", "-M", "1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.matches("-x/--cta_policy").count(), 1, "{err}");
    assert_eq!(err.matches("-M/--memory").count(), 1, "{err}");
    // No memory line where there is no GPU memory.
    assert!(!out.contains("GPU memory usage"));
    let (code, _, err) = run(&["-V", "0", "-D", "0"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(
        "device_cta_count (-V) must be positive and less than 128, got 0. Using default value 16."
    ));
}

#[test]
fn a_device_api_implementation_is_refused_off_nccl_with_one_line() {
    let (code, out, err) = run(&["-D", "1", "-R", "2"]);
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("use --backend nccl, or -D 0"), "{err}");
}

#[test]
fn a_repeated_flag_takes_its_last_value() {
    let (code, out, err) = run(&[
        "-n",
        "1",
        "-n",
        "3",
        "-d",
        "int8",
        "--datatype",
        "double",
        "-e",
        "1K",
        "-e",
        "2K",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("iters: 3 "), "{out}");
    let rows = data_rows(&out);
    assert_eq!(rows.len(), 2, "{out}");
    assert!(rows.iter().all(|r| r[2] == "double"), "{out}");
}
