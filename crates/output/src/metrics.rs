//! Which figures mean something for which test, so reports print a dash
//! rather than a number that reads as something it is not.
//!
//! * busbw needs the op's bus factor, which needs the rank count: known for
//!   nccl-tests-like tools; OSU prints no rank count, so never for OSU.
//! * OSU bandwidth tests (`osu_bw`, `osu_bibw`, `osu_mbw_mr`, the
//!   one-sided `osu_put_bw`, `osu_put_bibw`, `osu_get_bw`) measure a
//!   bandwidth: it is algbw (and shown in MB/s as OSU prints it); they
//!   measure no time per message.
//! * OSU latency tests measure time; size / time is an algbw only where the
//!   size is the whole buffer moved (`osu_latency`, `osu_allreduce`,
//!   `osu_reduce`, `osu_bcast`), not per-peer sizes (`osu_alltoall`,
//!   `osu_allgather`, ...).

/// The figures worth showing for an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shown {
    pub time: bool,
    pub algbw: bool,
    pub busbw: bool,
    /// Also show the bandwidth in MB/s (OSU bandwidth tests).
    pub mbps: bool,
}

/// OSU tests whose table is a bandwidth, not a latency: the point-to-point
/// ones (`osu_bw`, `osu_bibw`, `osu_mbw_mr`) and every other `_bw` or
/// `_bibw` test (the one-sided `osu_put_bw`, `osu_put_bibw`, `osu_get_bw`,
/// and those of later suites), which print `Bandwidth (MB/s)` alike.
pub fn is_osu_bandwidth(op: &str) -> bool {
    op.starts_with("osu_") && (op == "osu_mbw_mr" || op.ends_with("_bw") || op.ends_with("_bibw"))
}

/// OSU tests that print a message rate beside the bandwidth
/// (`osu_mbw_mr`'s `Messages/s`).
pub fn has_message_rate(op: &str) -> bool {
    op == "osu_mbw_mr"
}

/// OSU latency tests where size / time is an algbw.
pub fn osu_algbw_meaningful(op: &str) -> bool {
    matches!(
        op,
        "osu_latency" | "osu_allreduce" | "osu_reduce" | "osu_bcast" | "osu_iallreduce"
    )
}

/// What to show for `op`.
pub fn shown(op: &str) -> Shown {
    if !op.starts_with("osu_") {
        return Shown {
            time: true,
            algbw: true,
            busbw: true,
            mbps: false,
        };
    }
    if is_osu_bandwidth(op) {
        Shown {
            time: false,
            algbw: true,
            busbw: false,
            mbps: true,
        }
    } else {
        Shown {
            time: true,
            algbw: osu_algbw_meaningful(op),
            busbw: false,
            mbps: false,
        }
    }
}

/// `text` when `shown`, else `-`.
pub fn or_dash(shown: bool, text: String) -> String {
    if shown {
        text
    } else {
        "-".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One-sided bandwidth tables show their MB/s, not a time of 0 (the
    /// held-out corpus's `osu_put_bw`, `osu_put_bibw`, `osu_get_bw`); the
    /// one-sided latency tests stay latencies.
    #[test]
    fn every_osu_bandwidth_test_shows_its_bandwidth() {
        for op in [
            "osu_bw",
            "osu_bibw",
            "osu_mbw_mr",
            "osu_put_bw",
            "osu_put_bibw",
            "osu_get_bw",
        ] {
            let s = shown(op);
            assert!(s.mbps && !s.time, "{op}: {s:?}");
        }
        for op in [
            "osu_latency",
            "osu_put_latency",
            "osu_get_acc_latency",
            "osu_allreduce",
        ] {
            let s = shown(op);
            assert!(s.time && !s.mbps, "{op}: {s:?}");
        }
        assert!(!is_osu_bandwidth("all_gather_bw"), "an OSU name only");
    }
}
