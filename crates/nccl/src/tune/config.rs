//! What a `collbench tune` candidate changes in a communicator's
//! `ncclConfig_t` (the layout and the init call are `crate::ffi::Config`
//! and `Nccl::comm_init_ranks`, shared with `-x`): a fixed channel count
//! (`minCTAs = maxCTAs = n`) and a CTA policy.

use crate::ffi::Config;

/// What a communicator is built with; `None` leaves NCCL's default (or
/// the flags', e.g. `-x`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CommConfig {
    /// `minCTAs = maxCTAs = n`: a fixed channel count.
    pub channels: Option<u32>,
    /// `CTAPolicy` (`NCCL_CTA_POLICY_*`).
    pub cta_policy: Option<i32>,
}

impl CommConfig {
    /// True when nothing is set: a plain communicator does.
    pub fn is_default(&self) -> bool {
        *self == CommConfig::default()
    }

    /// Sets what this config fixes in `c`, leaving the rest.
    pub fn apply(&self, c: &mut Config) {
        if let Some(n) = self.channels {
            let n = i32::try_from(n).unwrap_or(i32::MAX);
            c.min_ctas = n;
            c.max_ctas = n;
        }
        if let Some(p) = self.cta_policy {
            c.cta_policy = p;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::CONFIG_UNDEF_INT as UNDEF;

    #[test]
    fn a_channel_count_fixes_min_and_max_ctas() {
        let mut c = Config::new(22803);
        CommConfig {
            channels: Some(64),
            cta_policy: None,
        }
        .apply(&mut c);
        assert_eq!((c.min_ctas, c.max_ctas, c.cta_policy), (64, 64, UNDEF));
        let mut c = Config::new(22803);
        c.cta_policy = 1; // -x 1
        CommConfig {
            channels: Some(8),
            cta_policy: None,
        }
        .apply(&mut c);
        assert_eq!((c.min_ctas, c.cta_policy), (8, 1));
        CommConfig {
            channels: None,
            cta_policy: Some(2),
        }
        .apply(&mut c);
        assert_eq!((c.min_ctas, c.cta_policy), (8, 2));
        assert!(CommConfig::default().is_default());
    }
}
