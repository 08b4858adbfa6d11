//! Helpers shared by the tune crate's integration tests (`mod common;`).

use collbench_tune::TuneReport;

/// Fails, naming `what` and the band, if any band of `r` reports a gain:
/// for searches where every candidate truly takes the default's time.
pub fn assert_no_gain(r: &TuneReport, what: &str) {
    for b in &r.bands {
        assert!(
            b.gain().is_none(),
            "{what}: noise reported as a gain at {}: {:?}",
            b.band.probe_bytes,
            b.outcome
        );
    }
}
