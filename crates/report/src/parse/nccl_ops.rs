//! Op names of nccl-tests logs: from the binary's name (`all_reduce_perf`),
//! a mention in free text, a file name, or a guess from a row.

use collbench_core::{CaseResult, Collective, DataType};

/// `all_reduce_perf` (possibly with a path or a packager's suffix such as
/// `_mpi`) -> `all_reduce`; see [`Collective::from_tool_name`]. A name it
/// does not know is kept, less its `_perf`.
pub(crate) fn op_name(perf: &str) -> String {
    let base = perf.rsplit('/').next().unwrap_or(perf);
    Collective::from_tool_name(base).map_or_else(
        || base.trim_end_matches("_perf").to_string(),
        |c| c.name().to_string(),
    )
}

/// The last collective named in free text: `*_perf` binaries, or the
/// unambiguous spellings (`all-gather`, `allreduce`, `reduce_scatter`, ...).
/// Plain words such as "reduce" or "broadcast" are too common in prose.
pub(super) fn op_mentioned(text: &str) -> Option<String> {
    let mut found = None;
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')) {
        let lower = word.to_ascii_lowercase();
        if let Some(c) = Collective::from_perf_name(&lower) {
            found = Some(c.name().to_string());
            continue;
        }
        let norm: String = lower.chars().filter(|c| *c != '_' && *c != '-').collect();
        if [
            "allreduce",
            "allgather",
            "reducescatter",
            "alltoall",
            "sendrecv",
        ]
        .contains(&norm.as_str())
        {
            found = Collective::parse(&norm).ok().map(|c| c.name().to_string());
        }
    }
    found
}

/// A collective named inside a file name (`mpi2_all_reduce_graph.txt`).
pub(super) fn op_in_file_name(origin: &str) -> Option<String> {
    let base = origin
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(origin)
        .to_ascii_lowercase();
    let compact: String = base.chars().filter(|c| *c != '_' && *c != '-').collect();
    // Longer names first so "reducescatter" wins over "reduce" and "scatter".
    let mut names: Vec<Collective> = Collective::ALL.to_vec();
    names.sort_by_key(|c| std::cmp::Reverse(c.name().len()));
    names
        .into_iter()
        .find(|c| compact.contains(&c.name().replace('_', "")))
        .map(|c| c.name().to_string())
}

/// Guesses the collective from a row when the log never names it: the
/// size/count ratio tells per-rank-split collectives from whole-buffer ones,
/// redop and root narrow it further. all_reduce and sendrecv look alike;
/// all_reduce is by far the common case.
pub(super) fn guess_op(r: &CaseResult, world: u64) -> Option<&'static str> {
    let ws = DataType::parse(&r.dtype).ok()?.size_bytes() as u64;
    let whole = r.count.checked_mul(ws)? == r.size_bytes;
    let reduces = !(r.redop.is_empty() || r.redop == "none");
    let split = !whole && (world == 0 || r.count.checked_mul(ws * world)? == r.size_bytes);
    Some(match (reduces, r.root >= 0, whole, split) {
        (true, false, true, _) => "all_reduce",
        (true, false, false, true) => "reduce_scatter",
        (true, true, true, _) => "reduce",
        (false, true, true, _) => "broadcast",
        (false, false, false, true) => "all_gather",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_are_found_in_names_and_prose() {
        assert_eq!(op_name("./build/alltoall_perf"), "alltoall");
        assert_eq!(op_name("all_reduce_perf_mpi"), "all_reduce");
        assert_eq!(
            op_mentioned("srun ./all_gather_perf_nccl -b 8").as_deref(),
            Some("all_gather")
        );
        assert_eq!(
            op_mentioned("kubectl exec -- /configs/allgather.sh h1 h2").as_deref(),
            Some("all_gather")
        );
        assert_eq!(op_mentioned("we reduce costs"), None);
        assert_eq!(
            op_in_file_name("dir/mpi2_reduce_scatter.txt").as_deref(),
            Some("reduce_scatter")
        );
        assert_eq!(
            op_in_file_name("x/all_reduce.txt").as_deref(),
            Some("all_reduce")
        );
    }
}
