//! Single lines of an nccl-tests log, read without the parser's state:
//! a device line, a header glued after other text, NCCL's algorithm
//! matrix, and how many rows a header's sweep has.

use super::super::text::{after, is_figure};
use super::super::ParseError;
use collbench_core::DeviceInfo;

/// How many sizes the header's sweep has (one row each for one type and
/// op), at most [`MAX_RESERVED_ROWS`]; 0 when it does not say.
pub(super) fn sweep_rows(min: u64, max: u64, factor: Option<u64>, step: Option<u64>) -> usize {
    let n = match (factor, step) {
        _ if max < min => 0,
        (Some(f), _) if f > 1 && min > 0 => {
            let mut n = 0u64;
            let mut size = min;
            while size <= max && n < MAX_RESERVED_ROWS as u64 {
                n += 1;
                size = size.saturating_mul(f);
            }
            n
        }
        (_, Some(b)) if b > 0 => (max - min) / b + 1,
        _ => 0,
    };
    (n as usize).min(MAX_RESERVED_ROWS)
}

/// The most rows reserved from a header: `collbench run`'s largest sweep.
const MAX_RESERVED_ROWS: usize = 65_536;

/// A row of NCCL's `Func/Proto/Algo Matrix` (`    AllReduce |  1  2  1 | ...`).
pub(super) fn nccl_matrix_row(line: &str) -> bool {
    let mut cells = line.split('|');
    let first = cells.next().unwrap_or("");
    cells.count() >= 2 && first.split_whitespace().count() == 1
}

/// Where a comment line of nccl-tests starts after other text on its line:
/// text printed without a line end before it (rccl-tests' `On gfx942
/// architecture, using FNUZ FP8 types`), or a patched build's
/// `run(), common.cu:1084, ` in front of every line it prints. `None` for
/// a row with a note (`... 0  # here`) and for other lines.
pub(super) fn glued_header(raw: &str) -> Option<usize> {
    const STARTS: [&str; 11] = [
        "nccl-tests version",
        "Collective test starting",
        "nThread ",
        "Rank ",
        "size ",
        "bytes ",
        "(B)",
        "Avg bus bandwidth",
        "Out of bounds",
        "Using devices",
        "out-of-place",
    ];
    let at = raw.find('#')?;
    let before = raw[..at].trim();
    if before.is_empty() || before.split_whitespace().next().is_some_and(is_figure) {
        return None;
    }
    let body = raw[at + 1..].trim_start();
    STARTS.iter().any(|s| body.starts_with(s)).then_some(at)
}

/// The error for output of several processes mixed line by line.
pub(super) fn interleaved(first: usize, second: usize, what: &str) -> ParseError {
    ParseError::at(
        second,
        format!(
            "lines {first} and {second}: {what}: the output of several processes is interleaved; \
             rerun with srun --label or mpirun --tag-output (or one output file per rank)"
        ),
    )
}

/// `#  Rank  0 Group  0 Pid   1378 on  vm device  0 [0000:00:06] NVIDIA H200`
/// (older builds have no `Group`).
pub(super) fn device(tokens: &[&str]) -> Option<DeviceInfo> {
    let num = |key: &str| after(tokens, key).and_then(|v| v.parse::<u64>().ok());
    let dev_at = tokens.iter().position(|t| *t == "device")?;
    let mut rest = tokens.get(dev_at + 2..).unwrap_or(&[]).iter();
    let mut bus_id = None;
    let mut name = Vec::new();
    for t in rest.by_ref() {
        match t.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            Some(b) if bus_id.is_none() && name.is_empty() => bus_id = Some(b.to_string()),
            _ => name.push(*t),
        }
    }
    Some(DeviceInfo {
        rank: num("Rank")?,
        group: num("Group").unwrap_or(0),
        pid: num("Pid").unwrap_or(0),
        host: after(tokens, "on").unwrap_or("").to_string(),
        device: num("device").unwrap_or(0),
        bus_id,
        name: name.join(" "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_tells_how_many_rows_its_sweep_has() {
        assert_eq!(sweep_rows(8, 8589934592, Some(2), None), 31);
        assert_eq!(sweep_rows(8, 524288, None, Some(8)), 65536);
        assert_eq!(sweep_rows(1, u64::MAX, None, Some(1)), 65536);
        assert_eq!(sweep_rows(16, 8, Some(2), None), 0);
        assert_eq!(sweep_rows(0, 0, None, None), 0);
    }

    #[test]
    fn headers_glued_after_text_are_found_and_row_notes_are_not() {
        let line = "run(), common.cu:1084, #       size         count      type";
        assert_eq!(glued_header(line), Some(23));
        let line = "On gfx942 architecture, using FNUZ FP8 types# nccl-tests version 2.13";
        assert_eq!(glued_header(line), Some(44));
        assert_eq!(
            glued_header("     8   2   float  sum  -1  1.0  # here"),
            None
        );
        assert_eq!(glued_header("# nThread 1"), None);
        assert!(nccl_matrix_row("    AllReduce |   1   2   1   |   0   1"));
        assert!(!nccl_matrix_row("we ran allreduce | twice"));
    }
}
