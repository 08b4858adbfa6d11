//! Communicators with a configuration: `ncclCommInitRankConfig` with an
//! `ncclConfig_t` in NCCL 2.28's layout, for `collbench tune`'s channel
//! (`minCTAs = maxCTAs = n`) and CTA-policy candidates.
//!
//! Kept apart from `crate::ffi` and `crate::api` on purpose (the `-x`
//! CTA-policy work may add its own config init to the backend's setup):
//! the entry point is resolved here from the library NCCL was loaded from
//! (the same, already-loaded instance), and only here is it called.

use crate::api::Communicator;
use crate::error::NcclError;
use crate::ffi::{Comm, Nccl, NcclResult, UniqueId};
use crate::group::Group;
use std::ffi::{c_char, c_int};
use std::path::Path;

/// `NCCL_CONFIG_UNDEF_INT`: NCCL's default for a field.
const UNDEF: c_int = c_int::MIN;
/// `NCCL_API_MAGIC`.
const MAGIC: u32 = 0xcafe_beef;
/// The header version whose layout [`RawConfig`] restates (NCCL 2.28.3):
/// NCCL reads the fields this version has, and no more.
const VERSION: u32 = 22803;

/// `ncclConfig_t` as NCCL 2.28's nccl.h declares it (`ncclConfig_v22800`).
/// NCCL only appends fields, and reads `size` and `version` to know which
/// a caller has.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RawConfig {
    pub size: usize,
    pub magic: u32,
    pub version: u32,
    pub blocking: c_int,
    pub cga_cluster_size: c_int,
    pub min_ctas: c_int,
    pub max_ctas: c_int,
    pub net_name: *const c_char,
    pub split_share: c_int,
    pub traffic_class: c_int,
    pub comm_name: *const c_char,
    pub collnet_enable: c_int,
    pub cta_policy: c_int,
    pub shrink_share: c_int,
    pub nvls_ctas: c_int,
    pub n_channels_per_net_peer: c_int,
    pub nvlink_centric_sched: c_int,
}

impl RawConfig {
    /// `NCCL_CONFIG_INITIALIZER`: every field NCCL's default.
    pub fn initializer() -> RawConfig {
        RawConfig {
            size: std::mem::size_of::<RawConfig>(),
            magic: MAGIC,
            version: VERSION,
            blocking: UNDEF,
            cga_cluster_size: UNDEF,
            min_ctas: UNDEF,
            max_ctas: UNDEF,
            net_name: std::ptr::null(),
            split_share: UNDEF,
            traffic_class: UNDEF,
            comm_name: std::ptr::null(),
            collnet_enable: UNDEF,
            cta_policy: UNDEF,
            shrink_share: UNDEF,
            nvls_ctas: UNDEF,
            n_channels_per_net_peer: UNDEF,
            nvlink_centric_sched: UNDEF,
        }
    }
}

/// What a communicator is built with; `None` leaves NCCL's default.
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

    /// The `ncclConfig_t` NCCL gets.
    pub fn raw(&self) -> RawConfig {
        let mut c = RawConfig::initializer();
        if let Some(n) = self.channels {
            let n = c_int::try_from(n).unwrap_or(c_int::MAX);
            c.min_ctas = n;
            c.max_ctas = n;
        }
        if let Some(p) = self.cta_policy {
            c.cta_policy = p;
        }
        c
    }
}

type InitRankConfig =
    unsafe extern "C" fn(*mut Comm, c_int, UniqueId, c_int, *mut RawConfig) -> NcclResult;

/// `ncclCommInitRankConfig` of the library at `lib_path` (already loaded
/// by [`crate::loader`]; opening it again finds that instance).
fn resolve(lib_path: &Path) -> Result<InitRankConfig, NcclError> {
    let missing = |reason: String| NcclError::MissingSymbol {
        symbol: "ncclCommInitRankConfig",
        reason,
    };
    // SAFETY: the NCCL library collbench already loaded; opening it again
    // runs no initialisers and hands back the same instance.
    let lib = unsafe { libloading::Library::new(lib_path) }.map_err(|e| missing(e.to_string()))?;
    // SAFETY: the symbol has this C signature in nccl.h (2.14 and later).
    let f: InitRankConfig = unsafe {
        *lib.get::<InitRankConfig>(b"ncclCommInitRankConfig\0")
            .map_err(|e| missing(e.to_string()))?
    };
    // Kept loaded, as crate::ffi keeps NCCL: the pointer must not dangle.
    std::mem::forget(lib);
    Ok(f)
}

/// `ncclCommInitRankConfig` for each of this process's `ranks` of
/// `nranks`, in one group (they are collective), each with `config`;
/// `before_each(i)` runs before the i-th (binding its GPU).
pub fn init_ranks<E: From<NcclError>>(
    nccl: &Nccl,
    lib_path: &Path,
    nranks: usize,
    id: UniqueId,
    ranks: &[usize],
    config: &CommConfig,
    mut before_each: impl FnMut(usize) -> Result<(), E>,
) -> Result<Vec<Communicator>, E> {
    let init = resolve(lib_path)?;
    // NCCL reads the config during the call and at ncclGroupEnd; one per
    // rank, alive and unmoved until the group has ended (as the slots).
    let mut configs: Vec<RawConfig> = vec![config.raw(); ranks.len()];
    let cfgs = configs.as_mut_ptr();
    let mut comms: Vec<Comm> = vec![std::ptr::null_mut(); ranks.len()];
    let slots = comms.as_mut_ptr();
    let group = Group::start(nccl)?;
    for (i, &rank) in ranks.iter().enumerate() {
        before_each(i)?;
        // SAFETY: `slots.add(i)` and `cfgs.add(i)` are inside `comms` and
        // `configs` (i < ranks.len()), neither moved nor read until the
        // group has ended (the guard drops first, on error paths too); the
        // config is a complete ncclConfig_t of the size it states.
        let r = unsafe {
            init(
                slots.add(i),
                nranks as c_int,
                id,
                rank as c_int,
                cfgs.add(i),
            )
        };
        nccl.check("ncclCommInitRankConfig", r)?;
    }
    group.end()?;
    drop(configs);
    Ok(comms.into_iter().map(Communicator::from_raw).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn the_layout_is_nccl_2_28s() {
        // ncclConfig_v22800 on LP64: 3 header fields, 4 ints, a pointer,
        // 2 ints, a pointer, 6 ints.
        assert_eq!(size_of::<RawConfig>(), 80);
        assert_eq!(offset_of!(RawConfig, blocking), 16);
        assert_eq!(offset_of!(RawConfig, min_ctas), 24);
        assert_eq!(offset_of!(RawConfig, max_ctas), 28);
        assert_eq!(offset_of!(RawConfig, net_name), 32);
        assert_eq!(offset_of!(RawConfig, comm_name), 48);
        assert_eq!(offset_of!(RawConfig, cta_policy), 60);
        assert_eq!(offset_of!(RawConfig, nvlink_centric_sched), 76);
    }

    #[test]
    fn the_initializer_leaves_everything_to_nccl() {
        let c = RawConfig::initializer();
        assert_eq!((c.size, c.magic, c.version), (80, 0xcafebeef, 22803));
        assert_eq!(
            (c.min_ctas, c.max_ctas, c.cta_policy),
            (UNDEF, UNDEF, UNDEF)
        );
        assert!(c.net_name.is_null() && c.comm_name.is_null());
        assert!(CommConfig::default().is_default());
    }

    #[test]
    fn a_channel_count_fixes_min_and_max_ctas() {
        let c = CommConfig {
            channels: Some(64),
            cta_policy: None,
        }
        .raw();
        assert_eq!((c.min_ctas, c.max_ctas, c.cta_policy), (64, 64, UNDEF));
        let c = CommConfig {
            channels: None,
            cta_policy: Some(2),
        }
        .raw();
        assert_eq!((c.min_ctas, c.cta_policy), (UNDEF, 2));
    }
}
