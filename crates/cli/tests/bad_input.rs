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

/// Each mistake and a word its one line must say.
const MISTAKES: &[(&[&str], &str)] = &[
    // Min size above max size.
    (
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
    ),
    // Step factor of one or zero.
    (&["run", "--backend", "cpu", "-f", "1"], "stepfactor"),
    (&["run", "--backend", "cpu", "-f", "0"], "stepfactor"),
    // Unknown op, data type, reduction operator.
    (&["run", "allscatter", "--backend", "cpu"], "collective"),
    (&["run", "--backend", "cpu", "-d", "float128"], "data type"),
    (&["run", "--backend", "cpu", "-o", "xor"], "reduction"),
    (&["run", "--backend", "cpu", "--ranks", "0"], "--ranks"),
    // Sizes that are not numbers.
    (&["run", "--backend", "cpu", "-b", "lots"], "size"),
    (&["run", "--backend", "cpu", "-e", "1.5.2G"], "size"),
    // Unknown flag, backend, -a, -R.
    (&["run", "--frobnicate"], "frobnicate"),
    (&["run", "--backend", "tpu"], "backend"),
    (&["run", "--backend", "cpu", "-a", "7"], "average"),
    (&["run", "--backend", "cpu", "-R", "3"], "local_register"),
];

#[test]
fn every_mistake_is_one_line_and_exit_2() {
    for (args, mentions) in MISTAKES {
        expect_usage_error(args, mentions);
    }
}

#[test]
fn unwritable_output_path() {
    for (path, mentions) in [
        ("/nonexistent-dir/x.json", "cannot write"),
        ("/tmp/x.unknownext", "format"),
    ] {
        let args = ["run", "--backend", "cpu", "-b", "8", "-e", "8", "--output"];
        expect_usage_error(&[&args[..], &[path]].concat(), mentions);
    }
}
