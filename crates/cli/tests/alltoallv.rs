//! alltoallv as nccl-tests 2.19.6 has it, on the CPU backend: every
//! generator (default, NCCL_TESTS_ALLTOALLV_SPREAD, traffic matrix) checked
//! exactly for 1, 2, 3, 5 and 8 ranks; bad matrix files refused in one line
//! with exit 2; the `alltoallv_perf` alias.

mod common;

use collbench_core::alltoallv::{Traffic, TrafficMatrix};
use collbench_core::{Collective, Record};
use common::{alias, collbench, ok_stdout, stdout_ok, usage_error, write_file};

const RANKS: [usize; 5] = [1, 2, 3, 5, 8];

/// An 8x8 traffic matrix with zeros, unaligned values and a busy sender.
const MATRIX: &str = "\
500  100  2000 16   0    333  48   1000
64   0    0    0    17   900  1500 32
1999 16   0    256  512  1024 8    40
0    0    0    0    0    0    0    0
300  300  300  300  300  300  300  300
16   32   48   64   80   96   112  128
5000 0    0    0    0    0    0    0
100  200  300  400  500  600  700  800
";

/// Runs alltoallv with `env` and returns the record from `--format json`.
fn run(ranks: usize, env: &[(&str, &str)], sizes: &[&str]) -> Record {
    let out = collbench()
        .args(["run", "alltoallv", "--backend", "cpu", "--ranks"])
        .arg(ranks.to_string())
        .args(sizes)
        .args(["-d", "all", "-w", "0", "-n", "1", "--format", "json"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    serde_json::from_str(&ok_stdout(out, &format!("ranks {ranks} {env:?}"))).unwrap()
}

/// Every out-of-place placement was checked and exact; sizes are the
/// traffic's busiest buffer.
fn assert_exact(rec: &Record, traffic: &Traffic, ranks: usize, what: &str) {
    assert!(!rec.results.is_empty(), "{what}: no rows");
    for row in &rec.results {
        assert_eq!(row.op, "alltoallv");
        let oop = row.out_of_place.as_ref().unwrap();
        assert_eq!(oop.wrong, Some(0), "{what} ranks {ranks}: {row:?}");
        // nccl-tests does not check in-place alltoallv.
        assert_eq!(row.in_place.as_ref().unwrap().wrong, None);
        let dtype = collbench_core::DataType::parse(&row.dtype).unwrap();
        let elt = dtype.size_bytes();
        let want = traffic.counts(row_request(row, rec), elt, ranks);
        assert_eq!(row.size_bytes, want.size_bytes(elt), "{what}: {row:?}");
        assert_eq!(row.count, want.param_count, "{what}: {row:?}");
    }
}

/// The requested size of a row: rows run in sweep order per type.
fn row_request(row: &collbench_core::CaseResult, rec: &Record) -> u64 {
    let per_type: Vec<&collbench_core::CaseResult> = rec
        .results
        .iter()
        .filter(|r| r.dtype == row.dtype)
        .collect();
    let i = per_type.iter().position(|r| std::ptr::eq(*r, row)).unwrap();
    rec.settings.min_bytes << (2 * i)
}

#[test]
fn default_pattern_is_exact_for_every_rank_count() {
    for ranks in RANKS {
        let rec = run(ranks, &[], &["-b", "8", "-e", "64K", "-f", "4"]);
        assert_exact(&rec, &Traffic::default(), ranks, "default");
    }
}

#[test]
fn spread_pattern_is_exact_for_every_rank_count() {
    for spread in ["0.0", "0.3"] {
        let traffic = Traffic::generated(Some(spread)).unwrap();
        for ranks in RANKS {
            let env = [("NCCL_TESTS_ALLTOALLV_SPREAD", spread)];
            let rec = run(ranks, &env, &["-b", "8", "-e", "64K", "-f", "4"]);
            assert_exact(&rec, &traffic, ranks, spread);
        }
    }
}

#[test]
fn matrix_file_is_exact_for_every_rank_count() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(dir.path(), "traffic.txt", MATRIX);
    let path = file.to_str().unwrap();
    let traffic = Traffic::Matrix(TrafficMatrix::parse(path, MATRIX, None).unwrap());
    for ranks in RANKS {
        let env = [("NCCL_TESTS_ALLTOALLV_MATRIX_FILE", path)];
        let rec = run(ranks, &env, &["-b", "64K", "-e", "64K"]);
        assert_exact(&rec, &traffic, ranks, "matrix");
        // Matrix mode prints count 0 and the busiest buffer, as nccl-tests
        // does: on 8 ranks rank 0 receives 7936 bytes (column 0, each cell
        // rounded down to 16), more than any rank sends (rank 6: 4992).
        if ranks == 8 {
            assert_eq!(rec.results[0].count, 0);
            assert_eq!(rec.results[0].size_bytes, 7936);
        }
    }
}

#[test]
fn the_check_is_real() {
    let out = collbench()
        .args(["run", "alltoallv", "--backend", "cpu", "--ranks", "3"])
        .args([
            "-b",
            "4K",
            "-e",
            "4K",
            "-w",
            "0",
            "-n",
            "1",
            "--test-corrupt",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

fn one_line_exit_2(env: (&str, &str), args: &[&str]) -> String {
    usage_error(
        collbench()
            .args(["run", "alltoallv", "--backend", "cpu"])
            .args(args)
            .env(env.0, env.1),
    )
}

#[test]
fn bad_matrix_files_are_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = write_file(dir.path(), name, text);
        p.to_str().unwrap().to_string()
    };
    let var = "NCCL_TESTS_ALLTOALLV_MATRIX_FILE";
    let sizes = ["--ranks", "3", "-b", "1M", "-e", "1M"];
    let ragged = write("ragged.txt", "1 2 3\n4 5\n6 7 8\n");
    assert!(one_line_exit_2((var, &ragged), &sizes).contains("line 2 has 2 values"));
    let words = write("words.txt", "1 2\nthree 4\n");
    assert!(one_line_exit_2((var, &words), &sizes).contains("'three'"));
    let oblong = write("oblong.txt", "1 2\n3 4\n5 6\n");
    assert!(one_line_exit_2((var, &oblong), &sizes).contains("must be square"));
    let empty = write("empty.txt", "\n\n");
    assert!(one_line_exit_2((var, &empty), &sizes).contains("is empty"));
    // Mis-sized: smaller than the job, or -e too small for it.
    let small = write("small.txt", "16 16\n16 16\n");
    assert!(one_line_exit_2((var, &small), &sizes).contains("the job has 3 ranks"));
    let big = write("big.txt", "0 4096 4096\n0 0 0\n0 0 0\n");
    let e = one_line_exit_2((var, &big), &["--ranks", "3", "-b", "1K", "-e", "1K"]);
    assert!(e.contains("at least 8192 bytes"), "{e}");
    let e = one_line_exit_2((var, &big), &["--ranks", "3", "-b", "8", "-e", "1M"]);
    assert!(e.contains("must be equal"), "{e}");
    let missing = dir.path().join("missing.txt");
    one_line_exit_2((var, missing.to_str().unwrap()), &sizes);
    one_line_exit_2(("NCCL_TESTS_ALLTOALLV_SPREAD", "wide"), &sizes);
}

#[test]
fn alltoallv_perf_alias_takes_nccl_tests_flags() {
    let dir = tempfile::tempdir().unwrap();
    let exe = alias(dir.path(), "alltoallv_perf");
    let text = stdout_ok(
        assert_cmd::Command::new(&exe).args(["-b", "8", "-e", "128K", "-f", "2", "-g", "2"]),
    );
    common::assert_says(
        &text,
        &[
            "# Collective test starting: alltoallv_perf",
            "Out of bounds values : 0 OK",
        ],
    );
}

#[test]
fn run_all_includes_alltoallv() {
    let out = stdout_ok(
        collbench()
            .args(["run", "all", "--backend", "cpu", "--ranks", "2"])
            .args([
                "-b", "1K", "-e", "1K", "-w", "0", "-n", "1", "--format", "json",
            ]),
    );
    let rec: Record = serde_json::from_str(&out).unwrap();
    let ops: Vec<&str> = rec.results.iter().map(|r| r.op.as_str()).collect();
    assert!(ops.contains(&Collective::AllToAllV.name()), "{ops:?}");
}

/// `mpirun -np 3 collbench run alltoallv --backend mpi` (the `mpi` feature;
/// `cargo test -p collbench-cli --features mpi --test alltoallv`).
#[cfg(feature = "mpi")]
#[test]
fn mpi_backend_is_exact_with_every_generator() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(dir.path(), "traffic.txt", MATRIX);
    let matrix = file.to_str().unwrap();
    let cases: [(&str, &str, &[&str]); 3] = [
        (
            "NCCL_TESTS_ALLTOALLV_SPREAD",
            "1.0",
            &["-b", "8", "-e", "64K", "-f", "4"],
        ),
        (
            "NCCL_TESTS_ALLTOALLV_SPREAD",
            "0.3",
            &["-b", "8", "-e", "64K", "-f", "4"],
        ),
        (
            "NCCL_TESTS_ALLTOALLV_MATRIX_FILE",
            matrix,
            &["-b", "64K", "-e", "64K"],
        ),
    ];
    for (var, val, sizes) in cases {
        let args = [
            &["run", "alltoallv", "--backend", "mpi", "-d", "all"][..],
            &["-w", "0", "-n", "1"],
            sizes,
            &["--format", "json"],
        ]
        .concat();
        let out = common::mpirun(3, &["-x", &format!("{var}={val}")], &args);
        let rec: Record = serde_json::from_str(&ok_stdout(out, &format!("{var}={val}"))).unwrap();
        assert!(!rec.results.is_empty());
        for row in &rec.results {
            assert_eq!(
                row.out_of_place.as_ref().unwrap().wrong,
                Some(0),
                "{var}={val}: {row:?}"
            );
        }
    }
}
