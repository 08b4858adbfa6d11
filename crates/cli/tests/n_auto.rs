//! `collbench run -n auto` on the CPU backend: rows as with `-n N`, every
//! result exact, each placement's iteration count within the rule's bounds
//! (collbench_core::auto_iters::AutoIters), and bad counts refused in one
//! line.

mod common;

use collbench_core::adaptive::StopReason;
use collbench_core::auto_iters::{AutoIters, MAX_ITERS_PER_REPEAT};
use collbench_core::Record;
use common::collbench;

fn run(args: &[&str]) -> std::process::Output {
    collbench()
        .args(["run", "--backend", "cpu", "--ranks", "2"])
        .args(args)
        .output()
        .unwrap()
}

/// stdout of a run that must succeed.
fn run_ok(args: &[&str]) -> String {
    common::ok_stdout(run(args), "collbench run -n auto")
}

#[test]
fn auto_gives_every_row_exact_with_iterations_within_the_rule() {
    let out = run_ok(&[
        "all_reduce",
        "all_gather",
        "-b",
        "8",
        "-e",
        "8M",
        "-f",
        "8",
        "-n",
        "auto",
        "--format",
        "json",
    ]);
    let rec: Record = serde_json::from_str(&out).unwrap();
    assert_eq!(rec.settings.iters, 0, "the record says auto as 0");
    // 8 B .. 8 MiB by 8: 7 sizes (8 B .. 2 MiB) per op.
    assert_eq!(rec.results.len(), 2 * 7);
    let rule = AutoIters::default();
    for row in &rec.results {
        for p in [&row.out_of_place, &row.in_place] {
            let p = p.as_ref().unwrap();
            assert_eq!(p.wrong, Some(0), "{} {}", row.op, row.size_bytes);
            let n = p.iterations;
            // At least one sample; never more repeats than the maximum.
            assert!(n >= 1, "{} {}: {n}", row.op, row.size_bytes);
            assert!(
                n <= u64::from(rule.max_repeats) * u64::from(MAX_ITERS_PER_REPEAT),
                "{} {}: {n}",
                row.op,
                row.size_bytes
            );
            // Timed work stays near the cap (one repeat may cross it).
            let work_us = n as f64 * p.time_us;
            assert!(
                work_us < 2.0 * rule.max_placement_us,
                "{} {}: {work_us} us",
                row.op,
                row.size_bytes
            );
            // The precision its repeats reached travels with the row.
            let auto = p
                .auto
                .unwrap_or_else(|| panic!("{} {}: no auto", row.op, row.size_bytes));
            assert!(
                (1..=rule.max_repeats).contains(&auto.repeats) && u64::from(auto.repeats) <= n,
                "{} {}: {auto:?} of {n} iterations",
                row.op,
                row.size_bytes
            );
            assert_eq!(auto.rel_half_width.is_some(), auto.repeats > 1, "{auto:?}");
            if auto.stopped == StopReason::Tight {
                assert!(
                    auto.rel_half_width.unwrap() <= rule.rel_half_width,
                    "{auto:?}"
                );
                assert!(auto.repeats >= rule.min_repeats, "{auto:?}");
            }
            // Short iterations get at least the rule's minimum of
            // repeats, each of one iteration or more.
            if p.time_us < 1000.0 {
                assert!(
                    n >= u64::from(rule.min_repeats),
                    "{} {}: {n}",
                    row.op,
                    row.size_bytes
                );
            }
        }
    }
}

#[test]
fn auto_text_keeps_the_nccl_tests_layout() {
    let out = run_ok(&[
        "all_reduce",
        "-b",
        "8",
        "-e",
        "64K",
        "-f",
        "4",
        "-n",
        "auto",
    ]);
    let text = out;
    assert!(text.contains(" iters: auto agg iters: 1 "), "{text}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 7, "8 B .. 32 KiB by 4");
    for r in rows {
        assert_eq!(r.len(), 13, "{r:?}");
        assert_eq!((r[8], r[12]), ("0", "0"), "{r:?}");
    }
}

#[test]
fn a_count_of_zero_or_a_word_is_refused_in_one_line() {
    for bad in ["0", "foo", "auto2", "1.5"] {
        let out = run(&["all_reduce", "-b", "8", "-e", "8", "-n", bad]);
        assert_eq!(out.status.code(), Some(2), "-n {bad}");
        assert!(out.stdout.is_empty(), "-n {bad}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim_end().lines().count(), 1, "-n {bad}: {err}");
        assert!(
            err.contains("--iters") && err.contains("auto"),
            "-n {bad}: {err}"
        );
    }
}

/// Three processes (one CPU rank each, meeting after every operation) must
/// take the same number of repeats: each repeat, they agree on the slowest
/// process's figures through the control plane (an all_max). A process
/// that decided alone would make a call the others do not, and the job
/// would fail saying so.
#[test]
fn processes_follow_the_slowest_one_and_stay_in_step() {
    let port = common::free_port();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let args = "run all_reduce --backend cpu --ranks 1 -b 8 -e 64K -f 8 -n auto";
    let done: Vec<common::Finished> = (0..3)
        .map(|rank| {
            common::torchrun_rank(rank, 3, port)
                .args(args.split(' '))
                .env("COLLBENCH_TEST_CPU_PER_PROCESS", "1")
                .spawn()
                .unwrap()
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|child| common::finish(child, deadline))
        .collect();
    for (rank, f) in done.iter().enumerate() {
        assert_eq!(f.code, Some(0), "rank {rank}: {}", f.stderr);
    }
    let rows = common::rows(&done[0].stdout);
    assert_eq!(rows.len(), 5, "8 B .. 32 KiB by 8: {}", done[0].stdout);
    assert!(rows.iter().all(|r| r.oop == "0" && r.ip == "0"), "{rows:?}");
}
