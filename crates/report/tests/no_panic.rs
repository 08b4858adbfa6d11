//! Random and mutated text fed to every parser (and the chart drawing):
//! each must return, never panic. The clean-up step gets the same, plus
//! fixtures dressed as launchers and terminals leave them, which must read
//! exactly as the plain ones.

use collbench_report::input::clean;
use collbench_report::parse::{parse_str, parse_text, Format};
use collbench_report::render::charts::{heatmap_svg, line_chart_svg, Series};
use proptest::prelude::*;
use std::path::Path;

const FORMATS: [Option<Format>; 10] = [
    None,
    Some(Format::NcclTests),
    Some(Format::NcclJson),
    Some(Format::Rccl),
    Some(Format::Nccom),
    Some(Format::Osu),
    Some(Format::Nvshmem),
    Some(Format::CollbenchJson),
    Some(Format::Collbench),
    Some(Format::Inspector),
];

/// Every fixture, as seeds for mutation.
fn corpus() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out = Vec::new();
    for dir in [
        "anchors",
        "foreign",
        "seeds",
        "small",
        "bad",
        "collbench",
        "failing",
    ] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        out.extend(
            files
                .iter()
                .map(|f| String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned()),
        );
    }
    out
}

fn parse_all(text: &str) {
    for f in FORMATS {
        let _ = parse_str(text, f, "fuzz.txt");
    }
}

/// Pieces that steer the parsers into their table-reading paths.
const TOKENS: [&str; 24] = [
    "#",
    "size",
    "count",
    "N/A",
    "-1",
    "8589934592",
    "1e309",
    "nan",
    "\n",
    "# Avg bus bandwidth : ",
    "size(B)",
    "count(elems)",
    "# OSU MPI Latency Test v7.4\n# Size  Avg Latency(us)\n",
    "#alltoall_device\n",
    "timestamp",
    "{\"results\":[{",
    "\r",
    "\r\n",
    "\u{1b}[1;31m",
    "\n  0: ",
    "\n[1,0]<stdout>:",
    "\n[3] ",
    "\nnode1: ",
    "{\"coll_perf\":{\"coll\":\"AllReduce\",",
];

#[derive(Debug, Clone)]
enum Edit {
    Delete(usize, usize),
    Insert(usize, usize),
    DuplicateLine(usize),
    Truncate(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(a, n)| Edit::Delete(a, n)),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(a, t)| Edit::Insert(a, t)),
        any::<usize>().prop_map(Edit::DuplicateLine),
        any::<usize>().prop_map(Edit::Truncate),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for e in edits {
        let len = bytes.len().max(1);
        match *e {
            Edit::Delete(at, n) => {
                let at = at % len;
                let end = (at + n).min(bytes.len());
                if at < end {
                    bytes.drain(at..end);
                }
            }
            Edit::Insert(at, t) => {
                let at = (at % len).min(bytes.len());
                bytes.splice(at..at, TOKENS[t].bytes());
            }
            Edit::DuplicateLine(at) => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let mut lines: Vec<&str> = text.lines().collect();
                if !lines.is_empty() {
                    let i = at % lines.len();
                    lines.insert(i, lines[i]);
                }
                bytes = lines.join("\n").into_bytes();
            }
            Edit::Truncate(at) => bytes.truncate(at % len),
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_text_never_panics(text in "(?s).{0,600}") {
        parse_all(&text);
    }

    #[test]
    fn random_token_soup_never_panics(parts in proptest::collection::vec(0..TOKENS.len(), 0..60), nums in proptest::collection::vec("[0-9.e+-]{1,8}", 0..60)) {
        let mut text = String::new();
        for (i, p) in parts.iter().enumerate() {
            text.push_str(TOKENS[*p]);
            text.push(' ');
            if let Some(n) = nums.get(i) {
                text.push_str(n);
                text.push(' ');
            }
        }
        parse_all(&text);
    }

    #[test]
    fn mutated_fixtures_never_panic(pick in any::<usize>(), edits in proptest::collection::vec(edit(), 1..8)) {
        let corpus = corpus();
        let text = apply(&corpus[pick % corpus.len()], &edits);
        parse_all(&text);
    }

    #[test]
    fn clean_never_panics_and_maps_lines(text in "(?s).{0,400}", pick in any::<usize>(), edits in proptest::collection::vec(edit(), 0..6)) {
        let corpus = corpus();
        for t in [text.clone(), apply(&corpus[pick % corpus.len()], &edits)] {
            let c = clean(&t);
            for s in &c.streams {
                prop_assert_eq!(s.line_map.len(), s.text.lines().count());
                prop_assert!(s.line_map.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(s.line_map.iter().all(|l| *l >= 1 && *l <= c.last_line));
            }
            parse_all(&t);
        }
    }

    #[test]
    fn dressed_fixtures_read_as_the_plain_ones(pick in any::<usize>(), prefix in 0usize..6, crlf in 0usize..3, colour in any::<bool>()) {
        let corpus = corpus();
        let plain = &corpus[pick % corpus.len()];
        let prefix = ["", "  0: ", "[1,0]<stdout>:", "Tue Dec  1 03:02:34 2026[1,0]<stdout>:", "[0] ", "gpu-07: "][prefix];
        let end = ["\n", "\r\n", "\r"][crlf];
        let mut dressed = String::new();
        for l in plain.lines() {
            if colour {
                dressed.push_str(&format!("{prefix}\u{1b}[0;32m{l}\u{1b}[0m{end}"));
            } else {
                dressed.push_str(&format!("{prefix}{l}{end}"));
            }
        }
        // The plain text with the same (complete) last line.
        let plain_whole: String = plain.lines().map(|l| format!("{l}\n")).collect();
        let a = parse_text(&plain_whole, None, "fuzz.txt");
        let b = parse_text(&dressed, None, "fuzz.txt");
        prop_assert_eq!(a.is_ok(), b.is_ok(), "{:?} vs {:?}", a.as_ref().err(), b.as_ref().err());
        if let (Ok(a), Ok(b)) = (a, b) {
            prop_assert_eq!(a.records, b.records);
        }
    }

    #[test]
    fn charts_never_panic(points in proptest::collection::vec((any::<f64>(), any::<f64>()), 0..20), log_y in any::<bool>(), n in 0usize..5) {
        let s = Series { label: "x".into(), points };
        prop_assert!(line_chart_svg("t", "y", &[s], log_y).contains("<svg"));
        let m: Vec<Vec<f64>> = (0..n).map(|i| (0..n).map(|j| (i * j) as f64).collect()).collect();
        let labels: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        prop_assert!(heatmap_svg(&labels, &m, None).contains("<svg"));
    }
}
