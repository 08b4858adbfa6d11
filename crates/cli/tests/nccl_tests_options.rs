//! Every option of nccl-tests 2.19.6 is accepted, short and long: the
//! option table is read from ../shared/reference/nccl-tests-2.19.6/src/
//! common.cu (its `longopts[]` and getopt string, as written there), and
//! the binary runs with each flag and a valid value on the CPU backend.

use assert_cmd::Command;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One nccl-tests option: long name, short letter, takes a value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Opt {
    long: String,
    short: char,
    takes_value: bool,
}

fn common_cu() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/nccl-tests-2.19.6/src/common.cu");
    std::fs::read_to_string(&p).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: the nccl-tests 2.19.6 tree belongs in shared/reference",
            p.display()
        )
    })
}

/// The table as common.cu writes it: `{"name", required_argument, 0, 'c'},`
/// lines between `longopts[] = {` and `};`, checked against the getopt
/// string (`"t:g:b:..."`, a colon after letters that take a value).
fn option_table() -> Vec<Opt> {
    let src = common_cu();
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
    opts
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
    let table = option_table();
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
    let table = option_table();
    // nccl-tests 2.19.6 has 32 options (with -h); a few of them by name.
    assert_eq!(table.len(), 32, "{table:?}");
    let find = |s: char| table.iter().find(|o| o.short == s).unwrap().clone();
    assert_eq!(find('I').long, "per_iter_timing");
    assert_eq!(find('x').long, "cta_policy");
    assert!(!find('h').takes_value);
    assert!(find('J').takes_value);
}
