//! Issue #40 as a user meets it: every placement of a CPU run carries a
//! ceiling and its bottleneck, no row beats its ceiling, and `expect`
//! answers for a topology file (one clear line for a bad one).

mod common;

use common::{collbench, cpu_run, one_line_refusal, stdout_ok};

/// The ops the CPU ceiling models, every one judged.
const CPU_OPS: [&str; 7] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
];

/// A CPU sweep: its flags and its sizes' count.
struct Sweep {
    flags: [&'static str; 8],
    sizes: usize,
}

/// 16-64 MiB: past the caches, where issue #40's floor is judged.
const LARGE: Sweep = Sweep {
    flags: ["-b", "16M", "-e", "64M", "-f", "2", "-n", "5"],
    sizes: 3,
};

/// 1 KiB-4 MiB, the run's largest size 4 MiB so that its buffers barely
/// rotate: rows live in L1, L2 and L3, where a copy outruns memory (a
/// 1-4 MiB row reached 1.1-1.3x a ceiling from the wrong cache level).
const SMALL: Sweep = Sweep {
    flags: ["-b", "1K", "-e", "4M", "-f", "4", "-n", "20"],
    sizes: 7,
};

/// (busbw, ceiling) of every placement of a CPU run of every modelled op.
fn cpu_ratios(ranks: &str, sweep: &Sweep) -> Vec<(String, f64, f64)> {
    let out = stdout_ok(
        cpu_run(CPU_OPS[0], ranks)
            .args(&CPU_OPS[1..])
            .args(sweep.flags)
            .args(["-w", "2", "--format", "json"]),
    );
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(doc["topology"]["cpu"]["mem_copy_gbps"].as_f64().unwrap() > 0.0);
    let mut rows = Vec::new();
    for r in doc["results"].as_array().unwrap() {
        for place in ["out_of_place", "in_place"] {
            let p = &r[place];
            let c = &p["ceiling"];
            assert_eq!(c["bottleneck"], "host_memory", "{r}");
            let name = format!("{} {} {place}", r["op"], r["size_bytes"]);
            rows.push((
                name,
                p["busbw_gbps"].as_f64().unwrap(),
                c["busbw_gbps"].as_f64().unwrap(),
            ));
        }
    }
    assert_eq!(rows.len(), CPU_OPS.len() * sweep.sizes * 2);
    rows
}

/// The share of a core each of this machine's cores gives a busy thread
/// over 300 ms (the smallest of them, from /proc/thread-self/schedstat's
/// time on CPU): 1.0 on a quiet machine, about 0.5 where another busy
/// process shares every core. `None` without schedstat.
fn cpu_share() -> Option<f64> {
    let on_cpu_ns = || -> Option<u64> {
        let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        text.split_whitespace().next()?.parse().ok()
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads: Vec<_> = (0..cores)
        .map(|_| {
            std::thread::spawn(move || {
                let (start, ran) = (std::time::Instant::now(), on_cpu_ns()?);
                while start.elapsed() < std::time::Duration::from_millis(300) {
                    std::hint::spin_loop();
                }
                let ran = on_cpu_ns()? - ran;
                Some(ran as f64 / start.elapsed().as_nanos() as f64)
            })
        })
        .collect();
    let shares: Option<Vec<f64>> = threads
        .into_iter()
        .map(|t| t.join().ok().flatten())
        .collect();
    shares?.into_iter().reduce(f64::min)
}

/// Three runs of `sweep` over `ranks`: every row's best busbw/ceiling, and
/// whether the machine gave the runs their cores. The ceiling is a bound:
/// no placement of any run above 1.05 of the highest ceiling the three
/// runs' probes gave it (each run probes once; a probe that a neighbour on
/// this shared host slowed gives a low ceiling for its run alone: once a
/// 64 MiB reduce_scatter at 10.05 GB/s sat at 1.10 of its run's 9.10).
fn best_of_three(ranks: &str, sweep: &Sweep) -> (Vec<(String, f64)>, bool) {
    let mut best: Vec<(String, f64)> = Vec::new();
    let mut quiet = true;
    let mut runs = Vec::new();
    for round in 0..3 {
        // Before and after: a load that starts during the run shows in
        // the second.
        let share = cpu_share();
        let rows = cpu_ratios(ranks, sweep);
        let after = cpu_share();
        quiet &= [share, after].iter().all(|s| s.is_some_and(|s| s > 0.9));
        for (i, (name, busbw, ceil)) in rows.iter().enumerate() {
            if round == 0 {
                best.push((name.clone(), busbw / ceil));
            } else {
                assert_eq!(best[i].0, *name);
                best[i].1 = best[i].1.max(busbw / ceil);
            }
        }
        println!("{ranks} ranks, run {round}: CPU share before it {share:?}, after {after:?}");
        runs.push(rows);
    }
    for (i, (name, _, _)) in runs[0].iter().enumerate() {
        let ceil = runs.iter().map(|r| r[i].2).fold(0.0, f64::max);
        for (round, rows) in runs.iter().enumerate() {
            let busbw = rows[i].1;
            assert!(
                busbw <= 1.05 * ceil,
                "{ranks} ranks, {name}, run {round}: {busbw} above {ceil} (the runs' ceilings: {:?})",
                runs.iter().map(|r| r[i].2).collect::<Vec<_>>()
            );
        }
    }
    for (name, ratio) in &best {
        println!("{ranks} ranks {name}: best {ratio:.2} of the ceiling");
    }
    (best, quiet)
}

/// Every op and placement, 2 and 4 ranks, 1 KiB to 64 MiB, at or below
/// 1.05 of its ceiling ([`best_of_three`]). And the large rows are not
/// loose: issue #40's floor, every row of 16 MiB or more at 0.2 of its
/// ceiling or more, for the best of three runs on a machine that gives the
/// run its cores. The ceiling's copy probes keep each core's fastest
/// chunk (a bound must not sit under a quiet moment), so where other
/// processes take the cores (`stress --cpu 2`, builds beside the tests)
/// rows fall under 0.2 with nothing wrong (0.13-0.44 at a load of 7 on 2
/// cores, bench/results/ceiling.md): there the floor is reported, not
/// judged. Small rows are latency's, far under any copy rate: no floor.
#[test]
fn cpu_rows_sit_under_their_ceiling_and_near_it() {
    for ranks in ["2", "4"] {
        best_of_three(ranks, &SMALL);
        let (best, quiet) = best_of_three(ranks, &LARGE);
        let low: Vec<_> = best.iter().filter(|(_, r)| *r < 0.2).collect();
        if quiet {
            assert!(
                low.is_empty(),
                "{ranks} ranks: under 0.2 of the ceiling in 3 runs: {low:?}"
            );
        } else if !low.is_empty() {
            println!("{ranks} ranks: the machine is busy (a core gave under 0.9 of its time): the 0.2 floor is not judged; under it: {low:?}");
        }
    }
}

#[test]
fn expect_names_the_bottleneck_of_a_described_machine() {
    let topo = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../topologies/volcengine-hpcpni3ln.toml"
    );
    let text =
        stdout_ok(collbench().args(["expect", "--topology", topo, "all_reduce", "all_gather"]));
    let ar = text.lines().find(|l| l.contains(" all_reduce ")).unwrap();
    assert!(
        ar.contains("375.0") && ar.contains("network") && ar.contains("NVLS tree"),
        "{ar}"
    );
    // Above the NICs' 200 GB/s, and the reason says why.
    assert!(
        text.contains("busbw counts the reduction done inside each host"),
        "{text}"
    );
    let json = stdout_ok(collbench().args([
        "expect",
        "--topology",
        topo,
        "all_gather",
        "--format",
        "json",
    ]));
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["rows"][0]["ceiling"]["busbw_gbps"], 200.0);
    assert_eq!(doc["rows"][0]["ceiling"]["bottleneck"], "network");
}

#[test]
fn a_bad_topology_file_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = common::write_file(dir.path(), "t.toml", "hosts = 2\n[gpu]\ncount = 0\n");
    let out = collbench()
        .args(["expect", "--topology"])
        .arg(&f)
        .output()
        .unwrap();
    let err = one_line_refusal(&out, 2);
    assert!(err.contains("[gpu] count = 0"), "{err}");
}

/// A rail-by-rail job (nccl-tests' NCCL_TESTS_SPLIT_MASK=0x7 on 8-GPU
/// hosts): eight 2-rank all_reduces at once share each host's 4 x 200G
/// NICs, so one of them is bound by an eighth of 100 GB/s; the Volcano
/// Engine table's "allreduce_splitmask7" reads 12.23.
#[test]
fn expect_splits_the_nics_among_concurrent_communicators() {
    let topo = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../topologies/volcengine-ebmhpcpni2l.toml"
    );
    let args = ["expect", "--topology", topo, "--hosts", "2", "all_reduce"];
    let whole = stdout_ok(collbench().args(args));
    assert!(whole.contains("100.0"), "{whole}");
    let split = stdout_ok(collbench().args(args).args(["--split-mask", "7"]));
    let row = split.lines().find(|l| l.contains(" all_reduce ")).unwrap();
    assert!(row.contains("12.5") && row.contains("network"), "{row}");
    assert!(
        split.contains("2 host(s) x 1 rank(s), 8 such communicators"),
        "{split}"
    );
}

/// The files of topologies/ are built in: a name works from any folder
/// (an installed wheel or image has no topologies/), `--help` lists every
/// one, and an unknown name is one line that lists them.
#[test]
fn expect_takes_a_built_in_topology_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let text = stdout_ok(collbench().current_dir(dir.path()).args([
        "expect",
        "--topology",
        "h200x2",
        "all_gather",
    ]));
    assert!(text.contains("400.0") && text.contains("NVLink"), "{text}");
    let help = stdout_ok(collbench().args(["expect", "--help"]));
    for (name, _) in collbench_ceiling::builtin::BUILTIN {
        assert!(help.contains(name), "--help lacks {name}");
    }
    let out = collbench()
        .current_dir(dir.path())
        .args(["expect", "--topology", "h100x9"])
        .output()
        .unwrap();
    let err = one_line_refusal(&out, 2);
    assert!(
        err.contains("h100x9") && err.contains("gke-a3-mega"),
        "{err}"
    );
}

/// An nccl-tests log carries no topology; `--topology` gives its rows the
/// described machine's ceilings, in `report` and in `compare` (the h200x2
/// anchor's 8 GiB all_reduce, 349.58 GB/s, is 87% of 400).
#[test]
fn report_and_compare_give_a_log_the_ceilings_of_a_described_machine() {
    let log = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../report/tests/fixtures/anchors/all_reduce.txt"
    );
    let plain = stdout_ok(collbench().args(["report", log]));
    assert!(!plain.contains("% of ceiling"), "{plain}");
    let md = stdout_ok(collbench().args(["report", log, "--topology", "h200x2"]));
    assert!(md.contains("| % of ceiling | bottleneck |"), "{md}");
    let row = md.lines().find(|l| l.starts_with("| 8 GiB ")).unwrap();
    assert!(row.contains("| 400.00 | 87% | NVLink |"), "{row}");
    let cmp = stdout_ok(collbench().args(["compare", log, log, "--topology", "h200x2"]));
    let row = cmp
        .lines()
        .find(|l| l.contains("| 8 GiB | out-of-place |"))
        .unwrap();
    assert!(row.contains("| 87% |"), "{row}");
    let out = collbench()
        .args(["report", log, "--topology", "h100x9"])
        .output()
        .unwrap();
    assert!(one_line_refusal(&out, 2).contains("h100x9"));
}
