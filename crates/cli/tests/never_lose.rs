//! Issue 26: nothing measured is lost and nothing outside the named output
//! is touched. Stdout that fails still leaves the files; `compare --format
//! json` is JSON.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_collbench");

fn collbench(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env("COLLBENCH_NCCL_LIB", "/nonexistent/libnccl.so.2")
        .output()
        .unwrap()
}

/// `collbench run all_reduce` on two CPU ranks from 8 B to `max_bytes`,
/// `iters` iterations, writing `--output output`, then `extra`.
fn cpu_sweep<'a>(
    max_bytes: &'a str,
    iters: &'a str,
    output: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args: Vec<&str> = "run all_reduce --backend cpu --ranks 2 -b 8"
        .split(' ')
        .collect();
    args.extend(["-e", max_bytes, "-n", iters, "--output", output]);
    args.extend_from_slice(extra);
    args
}

/// A CPU run's text log in `dir`.
fn log(dir: &std::path::Path, name: &str) {
    let out = collbench(dir, &cpu_sweep("64", "2", name, &[]));
    assert!(out.status.success(), "{out:?}");
}

/// `check > /dev/full` still writes --json and --prometheus (monitoring
/// reads them), then ends with exit 2.
#[test]
fn check_writes_its_files_when_stdout_fails() {
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::File::create("/dev/full").unwrap();
    let out = Command::new(BIN)
        .args([
            "check",
            "--backend",
            "cpu",
            "--ranks",
            "2",
            "-n",
            "2",
            "--size",
            "1M",
            "--json",
            "c.json",
            "--prometheus",
            "c.prom",
        ])
        .current_dir(dir.path())
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let json = std::fs::read_to_string(dir.path().join("c.json")).unwrap();
    assert!(json.contains("collbench-check/1"), "{json}");
    assert!(dir.path().join("c.prom").exists());
}

/// `run > /dev/full` stops at the first refused write (the table's
/// header) instead of measuring the whole sweep for nobody: one line,
/// exit 2, both files written and marked partial, within seconds where
/// the sweep takes far longer.
#[test]
fn run_stops_at_once_when_stdout_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::File::create("/dev/full").unwrap();
    let started = std::time::Instant::now();
    let out = Command::new(BIN)
        .args(["run", "all", "--backend", "cpu", "--ranks", "2", "-b", "8"])
        .args(["-e", "256M", "--output", "r.json", "-J", "j.json"])
        .current_dir(dir.path())
        .stdout(full)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{err}"
    );
    assert_eq!(
        err.trim_end(),
        "collbench: cannot write the results to standard output: No space left on device: \
         stopped before the first row: wrote --output r.json and -J j.json, marked partial (exit 2)"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(
        json["partial"],
        "stopped: standard output refused a write before the first row"
    );
    assert!(dir.path().join("j.json").exists());
}

/// `--format json|csv|md > /dev/full` stops at the first refused write,
/// the document's first line, as the text does: one line, exit 2, both
/// files written and marked partial, long before the sweep would end.
#[test]
fn every_stdout_format_stops_at_once_when_stdout_is_full() {
    for format in ["json", "csv", "md"] {
        let dir = tempfile::tempdir().unwrap();
        let full = std::fs::File::create("/dev/full").unwrap();
        let started = std::time::Instant::now();
        let out = Command::new(BIN)
            .args(["run", "all", "--backend", "cpu", "--ranks", "2", "-b", "8"])
            .args(["-e", "256M", "--format", format])
            .args(["--output", "r.json", "-J", "j.json"])
            .current_dir(dir.path())
            .stdout(full)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{format}: {err}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{format}: {err}"
        );
        assert_eq!(
            err.trim_end(),
            "collbench: cannot write the results to standard output: No space left on device: \
             stopped before the first row: wrote --output r.json and -J j.json, marked partial (exit 2)",
            "{format}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap())
                .unwrap();
        assert_eq!(
            json["partial"],
            "stopped: standard output refused a write before the first row"
        );
        assert!(dir.path().join("j.json").exists());
    }
}

/// `--format json|csv|md | head -1`: the reader takes the document's
/// first line and leaves; the run stops at the next row as the text's
/// does (exit 130, files marked partial) instead of measuring the whole
/// sweep for nobody and then writing neither file.
#[test]
fn every_stdout_format_stops_once_its_reader_has_gone() {
    for (format, first) in [
        ("json", "{"),
        ("csv", "op,dtype,"),
        ("md", "# collbench results"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let started = std::time::Instant::now();
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{{ '{BIN}' run all --backend cpu --ranks 2 -e 128M --format {format} --output r.csv -J j.json; echo $? > rc; }} | head -1"
            ))
            .current_dir(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let rc = std::fs::read_to_string(dir.path().join("rc")).unwrap();
        assert_eq!(rc.trim(), "130", "{format}: {err}");
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with(first),
            "{format}"
        );
        // A reader that leaves before the first row is written (a loaded
        // machine runs `head` first) is said as such; both are the stop.
        assert!(
            err.starts_with("collbench: standard output closed after")
                || err.starts_with("collbench: standard output closed before the first row"),
            "{format}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{format}: {err}");
        let csv = std::fs::read_to_string(dir.path().join("r.csv")).unwrap();
        assert!(
            csv.lines()
                .last()
                .unwrap()
                .starts_with("# partial: stopped: standard output was closed"),
            "{format}: {csv}"
        );
        assert!(dir.path().join("j.json").exists());
        // The whole sweep (all ops to 128M) takes far longer than this.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{format}"
        );
    }
}

/// A complete run whose stdout fails only at its end still writes its
/// files (complete, not partial), then says the one line, exit 2.
#[test]
fn a_stdout_that_fails_at_the_end_still_gets_the_files_written() {
    let dir = tempfile::tempdir().unwrap();
    // The pipe's reader leaves before the end: the last write fails.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{{ '{BIN}' run all_reduce --backend cpu --ranks 2 -b 8 -e 8 -n 1 --format json --output r.json; echo $? > rc; }} | true"
        ))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let rc = std::fs::read_to_string(dir.path().join("rc")).unwrap();
    assert!(["2", "130"].contains(&rc.trim()), "{rc} {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(dir.path().join("r.json").exists(), "{err}");
}

#[test]
fn compare_format_json_is_one_json_document() {
    let dir = tempfile::tempdir().unwrap();
    log(dir.path(), "a.txt");
    log(dir.path(), "b.json");
    let out = collbench(
        dir.path(),
        &["compare", "a.txt", "b.json", "--format", "json"],
    );
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "collbench-compare/1");
    assert_eq!(doc["exit_code"], out.status.code().unwrap());
    let cases = doc["cases"].as_array().unwrap();
    // 8 to 64 bytes: 4 sizes, two placements each.
    assert_eq!(cases.len(), 8, "{doc}");
    assert_eq!(cases[0]["judged_on"], "time");
    assert!(cases[0]["base"]["time_us"].as_f64().unwrap() > 0.0);
    // The input format is its own flag now.
    let out = collbench(
        dir.path(),
        &["compare", "a.txt", "a.txt", "--input-format", "nccl-tests"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// An input stays as it was, `--force` or not, whatever name reaches it:
/// the baseline named as `--json`, a hard link to a log as `report -o`,
/// and a symlink is never replaced by `--prometheus`.
#[test]
fn inputs_and_links_are_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = collbench(d, &["baselines", "show", "cpu-ci"]);
    std::fs::write(d.join("b.toml"), &out.stdout).unwrap();
    let out = collbench(
        d,
        &[
            "check",
            "--backend",
            "cpu",
            "--baseline",
            "b.toml",
            "--json",
            "b.toml",
            "--force",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        std::fs::read(d.join("b.toml")).unwrap(),
        out_of(d, &["baselines", "show", "cpu-ci"])
    );

    log(d, "in.txt");
    let before = std::fs::read(d.join("in.txt")).unwrap();
    std::fs::hard_link(d.join("in.txt"), d.join("hard.md")).unwrap();
    let out = collbench(d, &["report", "in.txt", "-o", "hard.md", "--force"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(std::fs::read(d.join("in.txt")).unwrap(), before);

    std::os::unix::fs::symlink("in.txt", d.join("m.prom")).unwrap();
    let out = collbench(d, &["check", "--backend", "cpu", "--prometheus", "m.prom"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(std::fs::symlink_metadata(d.join("m.prom"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(d.join("in.txt")).unwrap(), before);
}

fn out_of(dir: &std::path::Path, args: &[&str]) -> Vec<u8> {
    collbench(dir, args).stdout
}

/// Starts a long CPU sweep writing `--output x.json -J y.json`, waits for
/// three rows on stdout, sends `signal` (a real one, by pid) and returns
/// the exit code, stderr and the folder.
fn interrupt_a_sweep(signal: &str, extra: &[&str]) -> (Option<i32>, String, tempfile::TempDir) {
    use std::io::{BufRead, Read};
    let dir = tempfile::tempdir().unwrap();
    // -n 200 at up to 128M: minutes in all, the first rows at once.
    let mut args = cpu_sweep("128M", "200", "x.json", &["-J", "y.json"]);
    args.extend_from_slice(extra);
    let mut child = Command::new(BIN)
        .args(&args)
        .current_dir(dir.path())
        .env("COLLBENCH_NCCL_LIB", "/nonexistent/libnccl.so.2")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let started = std::time::Instant::now();
    let mut rows = 0;
    let mut line = String::new();
    while rows < 3 {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "stdout ended");
        // Text rows start with the size.
        if line.trim_start().starts_with(|c: char| c.is_ascii_digit()) {
            rows += 1;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
    }
    let killed = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    (status.code(), err, dir)
}

/// Ctrl-C (a real SIGINT) keeps the rows measured: both files are written,
/// marked partial, and the exit code is 130.
#[test]
fn sigint_writes_the_rows_done_marked_partial() {
    let (code, err, dir) = interrupt_a_sweep("-INT", &[]);
    assert_eq!(code, Some(130), "{err}");
    assert!(
        err.contains("wrote them to --output x.json and -J y.json, marked partial"),
        "{err}"
    );
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("x.json")).unwrap()).unwrap();
    let rows = record["results"].as_array().unwrap().len();
    assert!(rows >= 3, "{record}");
    assert!(
        record["partial"].as_str().unwrap().contains("interrupted"),
        "{record}"
    );
    let nccl: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("y.json")).unwrap()).unwrap();
    assert_eq!(nccl["results"].as_array().unwrap().len(), rows);
    assert!(nccl["errors"][0].as_str().unwrap().starts_with("partial: "));
    // A report of it says the sweep was cut.
    let out = collbench(dir.path(), &["report", "x.json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("partial: interrupted by a signal after"),
        "{err}"
    );
}

/// SIGTERM (a batch system's stop) is kept the same way.
#[test]
fn sigterm_keeps_the_rows_too() {
    let (code, err, dir) = interrupt_a_sweep("-TERM", &["--per-rank"]);
    assert_eq!(code, Some(130), "{err}");
    assert!(dir.path().join("x.json").exists(), "{err}");
    assert!(dir.path().join("y.json").exists(), "{err}");
}

/// Writes `bytes` bytes to `path` from `fill`, in 1 MiB chunks.
fn big_file(path: &std::path::Path, bytes: usize, mut fill: impl FnMut(&mut [u8])) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut chunk = vec![0u8; 1 << 20];
    for _ in 0..bytes / chunk.len() {
        fill(&mut chunk);
        f.write_all(&chunk).unwrap();
    }
}

/// `report` looks at a file's head before reading it: 200 MB of random
/// bytes and 100 MB of text that is no log are refused in well under a
/// second (reading them whole took 35 s and 7 GB for 1 GB); in a folder,
/// they are skipped beside a real log.
#[test]
fn report_refuses_huge_non_logs_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("logs")).unwrap();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    big_file(&d.join("logs/random.bin"), 200 << 20, |c| {
        for b in c.chunks_mut(8) {
            // xorshift64: random enough, and quick to make.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
        }
    });
    let line = b"the quick brown fox jumps over the lazy dog 0123456789 again\n";
    big_file(&d.join("logs/notes.txt"), 100 << 20, |c| {
        for (i, b) in c.iter_mut().enumerate() {
            *b = line[i % line.len()];
        }
    });
    for (file, said) in [
        (
            "logs/random.bin",
            "not a text log (binary data in its first KiB)",
        ),
        ("logs/notes.txt", "not a benchmark log: no nccl-tests"),
    ] {
        let started = std::time::Instant::now();
        let out = collbench(d, &["report", file]);
        let took = started.elapsed();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(said), "{err}");
        assert!(took < std::time::Duration::from_secs(1), "{file}: {took:?}");
    }
    log(d, "logs/run.txt");
    let started = std::time::Instant::now();
    let out = collbench(d, &["report", "logs"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert_eq!(err.matches("skipped").count(), 2, "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}
