//! Every user mistake is one line on stderr and exit 2: never a panic.

mod common;

fn expect_usage_error(args: &[&str], mentions: &str) {
    let out = common::collbench().args(args).output().unwrap();
    let err = common::one_line_refusal(&out, 2);
    assert!(
        err.to_lowercase().contains(&mentions.to_lowercase()),
        "{args:?}: {err} should mention {mentions}"
    );
    assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
}

#[test]
fn min_size_above_max_size() {
    expect_usage_error(
        &[
            "run",
            "all_reduce",
            "--backend",
            "cpu",
            "-b",
            "1M",
            "-e",
            "8",
        ],
        "-b",
    );
}

#[test]
fn step_factor_of_one_or_zero() {
    expect_usage_error(&["run", "--backend", "cpu", "-f", "1"], "stepfactor");
    expect_usage_error(&["run", "--backend", "cpu", "-f", "0"], "stepfactor");
}

#[test]
fn unknown_op_dtype_redop() {
    expect_usage_error(&["run", "allscatter", "--backend", "cpu"], "collective");
    expect_usage_error(&["run", "--backend", "cpu", "-d", "float128"], "data type");
    expect_usage_error(&["run", "--backend", "cpu", "-o", "xor"], "reduction");
}

#[test]
fn zero_ranks() {
    expect_usage_error(&["run", "--backend", "cpu", "--ranks", "0"], "--ranks");
}

#[test]
fn size_that_is_not_a_number() {
    expect_usage_error(&["run", "--backend", "cpu", "-b", "lots"], "size");
    expect_usage_error(&["run", "--backend", "cpu", "-e", "1.5.2G"], "size");
}

#[test]
fn unwritable_output_path() {
    for (path, mentions) in [
        ("/nonexistent-dir/x.json", "cannot write"),
        ("/tmp/x.unknownext", "format"),
    ] {
        let args = [
            "run",
            "--backend",
            "cpu",
            "-b",
            "8",
            "-e",
            "8",
            "--output",
            path,
        ];
        expect_usage_error(&args, mentions);
    }
}

#[test]
fn unknown_flag_and_backend() {
    expect_usage_error(&["run", "--frobnicate"], "frobnicate");
    expect_usage_error(&["run", "--backend", "tpu"], "backend");
    expect_usage_error(&["run", "--backend", "cpu", "-a", "7"], "average");
    expect_usage_error(&["run", "--backend", "cpu", "-R", "3"], "local_register");
}
