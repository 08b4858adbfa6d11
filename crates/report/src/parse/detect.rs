//! Guesses a log's format from markers each tool always prints.

use super::Format;
pub use crate::input::scan::looks_like_json;

/// The format of `text`, or `None` when no known marker is present.
/// JSON is told apart by its keys; text by its headers. Order matters where
/// formats share words: rccl-tests before nccl-tests (same table), nccom
/// (`count(elems)`) before NVSHMEM (`size(B)` too).
pub fn detect(text: &str) -> Option<Format> {
    if looks_like_json(text) {
        return Some(if text.contains("\"coll_perf\"") {
            Format::Inspector
        } else if text.contains("\"schema_version\"") {
            Format::CollbenchJson
        } else if text.contains("\"out_of_place\"")
            || text.contains("\"nccl_version\"")
            || (text.contains("\"version\"") && text.contains("\"results\""))
        {
            Format::NcclJson
        } else {
            Format::CollbenchJson
        });
    }
    // collbench's own text is nccl-tests' layout under its version line.
    if text.contains("# collbench version ") {
        Some(Format::Collbench)
    } else if text.contains("rccl-tests") || text.contains("RCCL version") {
        Some(Format::Rccl)
    } else if text.contains("count(elems)") || text.contains("nccom-test") {
        Some(Format::Nccom)
    } else if text.contains("# OSU ") || osu_title_without_hash(text) {
        Some(Format::Osu)
    } else if text.contains("size(B)") && text.contains("latency(us)")
        || text.contains("mype_node:")
    {
        Some(Format::Nvshmem)
    } else if (text.contains("busbw") && text.contains("algbw"))
        || text.contains("# nThread")
        || headerless_rows(text)
    {
        Some(Format::NcclTests)
    } else {
        None
    }
}

/// Whether `text` holds nccl-tests rows without any header (rows grepped
/// out of a log, or pasted alone): two lines of a known row layout.
fn headerless_rows(text: &str) -> bool {
    text.lines()
        .filter(|l| {
            let tokens: Vec<&str> = l.split_whitespace().collect();
            super::nccl_table::implied_header(&tokens).is_some()
        })
        .nth(1)
        .is_some()
}

/// Whether a line of `text` is an OSU title pasted without its '#'
/// (`OSU MPI Latency Test v7.4`).
fn osu_title_without_hash(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("OSU ") && l.contains(" Test")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_pick_the_format() {
        assert_eq!(
            detect("{\"version\":3,\"results\":[{\"out_of_place\":{}}]}"),
            Some(Format::NcclJson)
        );
        assert_eq!(
            detect("{\"schema_version\":1}"),
            Some(Format::CollbenchJson)
        );
        assert_eq!(
            detect("rccl-tests: Version develop\n# size count algbw busbw"),
            Some(Format::Rccl)
        );
        assert_eq!(
            detect("size(B) count(elems) type time(us)"),
            Some(Format::Nccom)
        );
        assert_eq!(detect("\n# OSU MPI Latency Test v7.4\n"), Some(Format::Osu));
        assert_eq!(
            detect("size(B) count type scope latency(us)"),
            Some(Format::Nvshmem)
        );
        assert_eq!(
            detect("# size count type time algbw busbw"),
            Some(Format::NcclTests)
        );
        assert_eq!(
            detect("# collbench version 0.1.0 (nccl-tests 2.19 output format) backend: cpu library: none\n# size count type time algbw busbw"),
            Some(Format::Collbench)
        );
        assert_eq!(detect("hello"), None);
        assert_eq!(
            detect("[{\"schema_version\":1}]"),
            Some(Format::CollbenchJson)
        );
    }

    #[test]
    fn a_bracket_that_is_not_json_starts_a_text_log() {
        let table = "\n# size count type redop root time algbw busbw #wrong\n";
        for first in [
            "[user@node1 ~]$ ./all_reduce_perf -g 8",
            "[1,0]<stdout>:# nThread 1",
            "[node1:1234] hello",
        ] {
            assert!(!looks_like_json(first), "{first}");
            assert_eq!(
                detect(&format!("{first}{table}")),
                Some(Format::NcclTests),
                "{first}"
            );
        }
        assert!(looks_like_json("  [\n  {\"a\": 1}]"));
        assert!(looks_like_json("{\"version\": 3}"));
        assert!(!looks_like_json(
            "{'CUDA_HOME': '/usr/local/cuda', 'NUM_GPUS': 16}"
        ));
    }
}
