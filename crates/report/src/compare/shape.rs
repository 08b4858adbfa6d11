//! What the rule needs of a case besides its estimate, in a file of its
//! own: the rule, the steep rule and the neighbour layout all read it.

/// What the rule needs of a case besides its estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CaseShape {
    /// Index of the op group (op, type, redop, root) the case belongs to.
    pub group: usize,
    pub size_bytes: u64,
    pub in_place: bool,
    /// Judged on time (latency regime) rather than bandwidth.
    pub by_time: bool,
    /// BASE's time in µs (for the latency regime's absolute floor; 0 where
    /// the test measures no time).
    pub base_time_us: f64,
}
