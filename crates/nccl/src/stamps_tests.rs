//! The hand-written PTX read as the driver will (no GPU needed), and the
//! GPU clock's alignment math.

use super::*;
use std::collections::BTreeMap;

/// One `.entry` of the PTX: its parameters (name -> type), declared
/// registers (prefix -> count) and instruction lines.
struct Entry {
    params: Vec<(String, String)>,
    regs: BTreeMap<String, usize>,
    body: Vec<String>,
}

/// The entries of `ptx`, in order, by name; panics where the text is
/// not laid out as an entry with its parameters and one braced body.
fn entries(ptx: &str) -> BTreeMap<String, Entry> {
    let code: String = ptx
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeMap::new();
    for part in code.split(".visible .entry ").skip(1) {
        let (name, rest) = part.split_once('(').expect("entry's parameters");
        let (params, rest) = rest.split_once(')').expect("parameters close");
        let params = params
            .split(',')
            .map(|p| {
                let words: Vec<&str> = p.split_whitespace().collect();
                assert_eq!(words.len(), 3, "`.param .type name`: {p}");
                assert_eq!(words[0], ".param");
                (words[2].to_string(), words[1].to_string())
            })
            .collect();
        let open = rest.find('{').expect("body opens");
        let close = rest.find('}').expect("body closes");
        assert!(
            rest[open + 1..close].find('{').is_none(),
            "one flat body in {name}"
        );
        let mut regs = BTreeMap::new();
        let mut body = Vec::new();
        for line in rest[open + 1..close].lines().map(str::trim) {
            if line.is_empty() || line.ends_with(':') {
                body.push(line.to_string());
                continue;
            }
            assert!(line.ends_with(';'), "{name}: `{line}` lacks its ';'");
            if let Some(decl) = line.strip_prefix(".reg ") {
                let decl = decl.trim_end_matches(';');
                let reg = decl.split_whitespace().last().unwrap();
                let (prefix, n) = reg.split_once('<').expect("%r<N>");
                regs.insert(prefix.to_string(), n.trim_end_matches('>').parse().unwrap());
            } else {
                body.push(line.to_string());
            }
        }
        let entry = Entry { params, regs, body };
        out.insert(name.trim().to_string(), entry);
    }
    out
}

/// Every `%name12` register in `line`, as (prefix, number).
fn registers(line: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for piece in line.split('%').skip(1) {
        let word: String = piece
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let digits = word.trim_start_matches(|c: char| c.is_ascii_alphabetic());
        if word == "globaltimer" || digits.is_empty() {
            continue;
        }
        let prefix = format!("%{}", &word[..word.len() - digits.len()]);
        out.push((prefix, digits.parse().unwrap()));
    }
    out
}

#[test]
fn the_ptx_declares_a_64_bit_module_a_driver_of_cuda_11_loads() {
    let head: Vec<&str> = PTX
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('.') && !l.starts_with(".visible"))
        .take(3)
        .collect();
    // PTX 7.0 / sm_70: CUDA 11.0 and every GPU NCCL's recent releases run.
    assert_eq!(head, [".version 7.0", ".target sm_70", ".address_size 64"]);
    assert!(
        PTX.is_ascii() && !PTX.contains('\0'),
        "the driver takes C text"
    );
}

#[test]
fn each_kernel_takes_what_its_launch_passes() {
    let e = entries(PTX);
    assert_eq!(
        e.keys().collect::<Vec<_>>(),
        ["collbench_spin", "collbench_stamp"]
    );
    let types =
        |name: &str| -> Vec<String> { e[name].params.iter().map(|p| p.1.clone()).collect() };
    // Stamps::stamp passes (u64 address, u32 slot); Stamps::spin one u64.
    assert_eq!(types("collbench_stamp"), [".u64", ".u32"]);
    assert_eq!(types("collbench_spin"), [".u64"]);
}

#[test]
fn every_register_and_parameter_used_is_declared_and_labels_resolve() {
    for (name, e) in entries(PTX) {
        let mut labels = Vec::new();
        for line in &e.body {
            if let Some(l) = line.strip_suffix(':') {
                labels.push(l.to_string());
                continue;
            }
            for (prefix, n) in registers(line) {
                let declared = e.regs.get(&prefix).copied().unwrap_or(0);
                assert!(
                    n < declared,
                    "{name}: {prefix}{n} beyond {prefix}<{declared}>"
                );
            }
            if let Some(p) = line.split("ld.param").nth(1) {
                let param = p.split('[').nth(1).unwrap().trim_end_matches("];");
                assert!(
                    e.params.iter().any(|(n, _)| n == param),
                    "{name} reads {param}"
                );
            }
        }
        for line in e.body.iter().filter(|l| l.contains(" bra")) {
            let target = line
                .split_whitespace()
                .last()
                .unwrap()
                .trim_end_matches(';');
            assert!(labels.iter().any(|l| l == target), "{name}: no {target}");
        }
        assert_eq!(e.body.last().map(String::as_str), Some("ret;"), "{name}");
        let timer_reads = e.body.iter().filter(|l| l.contains("%globaltimer")).count();
        assert!(timer_reads >= 1, "{name} reads the GPU's timer");
    }
}

#[test]
fn the_stamp_stores_the_timer_at_slot_times_8() {
    let e = entries(PTX);
    let body = e["collbench_stamp"].body.join("\n");
    for step in [
        "cvta.to.global.u64",
        "mul.wide.u32 \t%rd3, %r1, 8;",
        "mov.u64 \t%rd5, %globaltimer;",
        "st.global.u64 \t[%rd4], %rd5;",
    ] {
        assert!(body.contains(step), "collbench_stamp lacks {step}: {body}");
    }
}

#[test]
fn the_gpu_clock_is_the_rounds_intersection_within_half_the_tightest() {
    // The GPU timer reads 1.7e18 ns (Unix time) when the host's reads 5e9;
    // each round the GPU read it somewhere inside the host's window.
    let truth: i64 = 5_000_000_000 - 1_700_000_000_000_000_000;
    let round = |before: u64, window: u64, at: u64| Round {
        before,
        gpu: ((before + at) as i64 - truth) as u64,
        after: before + window,
    };
    let rounds = [
        round(5_000_000_000, 30_000, 20_000),
        round(5_000_100_000, 9_000, 4_000),
        round(5_000_200_000, 12_000, 7_000),
    ];
    let c = DeviceClock::from_rounds(&rounds);
    assert!(
        (c.0.offset_ns - truth).abs() <= c.error_ns() as i64,
        "{c:?}"
    );
    assert!(c.error_ns() <= 4_500, "the 9 us window bounds it: {c:?}");
    // A reading taken inside the second round lands inside its window.
    let host = c.to_host_ns(rounds[1].gpu);
    assert!(
        (rounds[1].before..=rounds[1].after).contains(&host),
        "{host}"
    );
}

#[test]
fn a_gpu_clock_that_stepped_falls_back_to_its_tightest_round() {
    // The two rounds' bounds do not meet (the timer was set meanwhile):
    // the 2 us round decides, not a blend of both.
    let rounds = [
        Round {
            before: 1_000,
            gpu: 10_000,
            after: 3_000,
        },
        Round {
            before: 50_000,
            gpu: 40_000,
            after: 60_000,
        },
    ];
    let c = DeviceClock::from_rounds(&rounds);
    assert_eq!((c.0.offset_ns, c.error_ns()), (-8_000, 1_000));
    assert_eq!(DeviceClock::default().to_host_ns(7), 7);
    assert_eq!(c.to_host_ns(5), 0, "never before the host's epoch");
}
