//! Every option of nccl-tests 2.19.6 is accepted, short and long: the
//! option table is read from ../shared/reference/nccl-tests-2.19.6/src/
//! common.cu (its `longopts[]` and getopt string, as written there), and
//! the binary runs with each flag and a valid value on the CPU backend.

use assert_cmd::Command;
use std::collections::BTreeMap;

mod common;

/// One nccl-tests option: long name, short letter, takes a value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Opt {
    long: String,
    short: char,
    takes_value: bool,
}

/// nccl-tests' common.cu, `None` (test skipped) where shared/reference
/// is absent.
fn common_cu() -> Option<String> {
    let p = common::reference("nccl-tests-2.19.6/src/common.cu")?;
    Some(std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// The table as common.cu writes it: `{"name", required_argument, 0, 'c'},`
/// lines between `longopts[] = {` and `};`, checked against the getopt
/// string (`"t:g:b:..."`, a colon after letters that take a value).
fn option_table() -> Option<Vec<Opt>> {
    let src = common_cu()?;
    let start = src.find("longopts[] = {").expect("longopts[] in common.cu");
    let body = &src[start..start + src[start..].find("};").expect("end of longopts")];
    let mut opts = Vec::new();
    for line in body.lines().map(str::trim).filter(|l| l.starts_with("{\"")) {
        let fields: Vec<&str> = line
            .trim_start_matches('{')
            .trim_end_matches(',')
            .trim_end_matches('}')
            .split(',')
            .map(str::trim)
            .collect();
        assert_eq!(fields.len(), 4, "option line: {line}");
        opts.push(Opt {
            long: fields[0].trim_matches('"').to_string(),
            short: fields[3].trim_matches('\'').chars().next().unwrap(),
            takes_value: match fields[1] {
                "required_argument" => true,
                "no_argument" => false,
                other => panic!("unexpected has_arg {other} in {line}"),
            },
        });
    }
    let marker = "getopt_long(argc, argv, \"";
    let at = src.find(marker).expect("getopt_long call") + marker.len();
    let spec = &src[at..at + src[at..].find('"').unwrap()];
    let mut shorts = BTreeMap::new();
    let chars: Vec<char> = spec.chars().collect();
    for (i, c) in chars.iter().enumerate().filter(|(_, c)| **c != ':') {
        shorts.insert(*c, chars.get(i + 1) == Some(&':'));
    }
    let from_table: BTreeMap<char, bool> = opts.iter().map(|o| (o.short, o.takes_value)).collect();
    assert_eq!(shorts, from_table, "getopt string and longopts[] disagree");
    Some(opts)
}

/// A valid value for each option on the CPU backend (nccl-tests' defaults
/// or the neutral choice).
fn value(short: char, dir: &std::path::Path) -> Option<String> {
    let v = match short {
        't' | 'g' | 'n' | 'm' | 'N' | 'c' | 'a' | 'I' => "1",
        'b' | 'e' | 'i' => "8",
        'f' => "2",
        'w' | 'p' | 'r' | 'z' | 'y' | 'T' | 'G' | 'C' | 'S' | 'R' | 'x' | 'D' | 'M' | 'u' | 'K' => {
            "0"
        }
        'V' => "16",
        'o' => "sum",
        'd' => "float",
        'J' => {
            return Some(
                dir.join(format!("out{}.json", rand_suffix()))
                    .display()
                    .to_string(),
            )
        }
        'h' => return None,
        other => panic!("no test value for -{other}: add one"),
    };
    Some(v.to_string())
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Runs `collbench run all_reduce --backend cpu -b 8 -e 8 -n 1 -w 0` with
/// `flag value` in place of any base flag of the same letter (nccl-tests
/// takes repeats, last wins; that is a separate matter). Returns the
/// failures as "flag: stderr" lines.
fn try_option(o: &Opt, dir: &std::path::Path) -> Vec<String> {
    let base = [('b', "8"), ('e', "8"), ('n', "1"), ('w', "0")];
    let mut failures = Vec::new();
    for form in [format!("-{}", o.short), format!("--{}", o.long)] {
        let mut cmd = Command::cargo_bin("collbench").unwrap();
        cmd.args(["run", "all_reduce", "--backend", "cpu", "--ranks", "1"]);
        for (c, v) in base.iter().filter(|(c, _)| *c != o.short) {
            cmd.arg(format!("-{c}")).arg(v);
        }
        cmd.arg(&form);
        if o.takes_value {
            cmd.arg(value(o.short, dir).expect("a value"));
        }
        let out = cmd.output().unwrap();
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            failures.push(format!("{form}: {}", err.trim()));
        }
    }
    failures
}

#[test]
fn every_nccl_tests_option_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let Some(table) = option_table() else { return };
    let failures: Vec<String> = table
        .iter()
        .flat_map(|o| try_option(o, dir.path()))
        .collect();
    assert!(
        failures.is_empty(),
        "{} nccl-tests option forms rejected:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_table_is_read_from_common_cu() {
    let Some(table) = option_table() else { return };
    // nccl-tests 2.19.6 has 32 options (with -h); a few of them by name.
    assert_eq!(table.len(), 32, "{table:?}");
    let find = |s: char| table.iter().find(|o| o.short == s).unwrap().clone();
    assert_eq!(find('I').long, "per_iter_timing");
    assert_eq!(find('x').long, "cta_policy");
    assert!(!find('h').takes_value);
    assert!(find('J').takes_value);
}

/// Every `<a/b/..>` value list of common.cu's usage text, as (short
/// letter, long name, values): `[-z,--blocking <0/1/2/3> ...]` gives
/// ('z', "blocking", [0, 1, 2, 3]). An option listed in several variants
/// (`-o`, by NCCL version) gives the union; a placeholder word such as
/// `nccltype` is not a value and is left out.
fn value_lists() -> Option<Vec<(char, String, Vec<String>)>> {
    let src = common_cu()?;
    let mut lists: Vec<(char, String, Vec<String>)> = Vec::new();
    for piece in src.split("\"[-").skip(1) {
        let Some((head, rest)) = piece.split_once(" <") else {
            continue;
        };
        let Some((short, long)) = head.split_once(",--") else {
            continue;
        };
        let Some((inner, _)) = rest.split_once('>') else {
            continue;
        };
        if !inner.contains('/') {
            continue;
        }
        let short = short.chars().next().unwrap();
        let values = inner
            .split('/')
            .filter(|v| !v.contains(' ') && *v != "nccltype")
            .map(str::to_string);
        match lists.iter_mut().find(|(s, _, _)| *s == short) {
            Some((_, _, have)) => {
                for v in values {
                    if !have.contains(&v) {
                        have.push(v);
                    }
                }
            }
            None => lists.push((short, long.to_string(), values.collect())),
        }
    }
    Some(lists)
}

#[test]
fn the_value_lists_are_read_from_common_cu() {
    let Some(lists) = value_lists() else { return };
    let of = |s: char| lists.iter().find(|l| l.0 == s).unwrap().2.clone();
    assert_eq!(of('z'), ["0", "1", "2", "3"]);
    assert_eq!(of('a'), ["0", "1", "2", "3"]);
    assert_eq!(of('R'), ["0", "1", "2"]);
    assert!(of('o').contains(&"mulsum".to_string()), "{:?}", of('o'));
    assert_eq!(of('d'), ["all"]);
    assert!(lists.len() >= 11, "{lists:?}");
}

/// Each value of each list, short and long form, runs on the CPU backend
/// with two ranks (exit 0).
#[test]
fn every_value_of_every_listed_option_runs() {
    let mut failures = Vec::new();
    let Some(lists) = value_lists() else { return };
    for (short, long, values) in lists {
        for v in &values {
            for form in [format!("-{short}"), format!("--{long}")] {
                let out = Command::cargo_bin("collbench")
                    .unwrap()
                    .args(["run", "all_reduce", "--backend", "cpu", "--ranks", "2"])
                    .args(["-b", "8", "-e", "64", "-n", "1", "-w", "0"])
                    .args([form.as_str(), v])
                    .output()
                    .unwrap();
                if !out.status.success() {
                    let err = String::from_utf8_lossy(&out.stderr);
                    failures.push(format!("{form} {v}: {}", err.trim()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `-N 0` runs until stopped (nccl-tests' "0=infinite"): more rows than
/// one cycle's, still running after them.
#[test]
fn run_cycles_0_repeats_until_stopped() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command as Std, Stdio};
    let mut child = Std::new(assert_cmd::cargo::cargo_bin("collbench"))
        .args(["run", "all_reduce", "--backend", "cpu", "--ranks", "2"])
        .args(["-b", "8", "-e", "64", "-n", "1", "-w", "0", "-N", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut rows = 0;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if line.trim_start().starts_with(|c: char| c.is_ascii_digit()) {
            rows += 1;
        }
        // One cycle is 4 rows (8 .. 64 B); 12 is three cycles.
        if rows >= 12 || std::time::Instant::now() > deadline {
            break;
        }
    }
    // Still running after three cycles: it would not stop by itself.
    let still_running = child.try_wait().unwrap().is_none();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(rows >= 12, "only {rows} rows before the deadline");
    assert!(still_running, "-N 0 ended by itself");
}
