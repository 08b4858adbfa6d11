//! A bound on busbw before it becomes a [`collbench_core::Ceiling`]: its
//! rate, the part that sets it and why, shared by the GPU formulas
//! (`model.rs`), the PCIe host's (`pcie.rs`) and the choice among
//! algorithms (`choice.rs`).

use collbench_core::Bottleneck;

/// One bound on busbw.
#[derive(Debug, Clone)]
pub(crate) struct Bound {
    pub gbps: f64,
    pub by: Bottleneck,
    pub why: String,
}

/// The lower of two bounds (the first on a tie).
pub(crate) fn min(a: Bound, b: Bound) -> Bound {
    if b.gbps < a.gbps {
        b
    } else {
        a
    }
}

/// A rate for a `why`: whole GB/s where it is whole, else one decimal
/// (a 200G NIC shared 8 ways is 3.1, not 3).
pub(crate) fn gb(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}
