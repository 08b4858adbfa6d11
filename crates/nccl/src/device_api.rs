//! nccl-tests' device-API implementations (`-D N`): the kernels of
//! kernels/device_api.cu (embedded as PTX), the NCCL 2.28 structs they and
//! ncclDevCommCreate take, which cases each implementation runs, and the
//! launch. Written for NCCL 2.28's device API (the struct layouts below);
//! `backend::flags` refuses other versions before anything is created.

use crate::api::Window;
use crate::cuda::{Function, Module, Stream};
pub use crate::dev_comm::{DevComm, DevCommRequirements};
use crate::error::CudaError;
use collbench_core::{Collective, DataType, ReduceOp};
use std::ffi::c_void;

/// The PTX built from kernels/device_api.cu by kernels/regen-device-ptx.sh.
const PTX: &str = include_str!("../kernels/device_api.ptx");

/// Threads per CTA, as nccl-tests launches its device kernels.
pub const THREADS_PER_CTA: u32 = 512;

/// `-V`'s default, and what an out-of-range `-V` becomes (nccl-tests).
pub const DEFAULT_CTAS: i32 = 16;

/// The data types the device kernels take (nccl-tests' SPECIALIZE_KERNEL:
/// int8 .. double, the types before bfloat16 in nccl-tests' order).
pub const TYPES: &[DataType] = DataType::ALL.split_at(9).0;

/// The collectives with device kernels, in the PTX's order.
const COLLECTIVES: [Collective; 2] = [Collective::AllReduce, Collective::AllToAll];

/// The implementations carried (`-D 1`, `-D 2`) for each collective.
const IMPLEMENTATIONS: [i32; 2] = [1, 2];

/// `-V` as nccl-tests takes it: unset or out of 1..=128 is 16.
pub fn cta_count(asked: Option<i32>) -> u32 {
    match asked {
        Some(v) if (1..=128).contains(&v) => v as u32,
        _ => DEFAULT_CTAS as u32,
    }
}

/// Whether implementation `d` runs this case, as nccl-tests decides it:
/// all_reduce and alltoall only, sum only, int8 .. double. `Err` is the
/// one line that says why not and what runs instead.
pub fn check_case(
    d: i32,
    coll: Collective,
    dtype: DataType,
    redop: ReduceOp,
) -> Result<(), String> {
    if !COLLECTIVES.contains(&coll) {
        return Err(format!(
            "Device implementation {d} is not supported by {coll}: the device-API kernels are all_reduce and alltoall (use -D 0 for {coll})"
        ));
    }
    if coll == Collective::AllReduce && redop != ReduceOp::Sum {
        return Err(format!(
            "-D {d} all_reduce sums only (nccl-tests' device kernels have no {redop}): use -o sum, or -D 0"
        ));
    }
    if !TYPES.contains(&dtype) {
        return Err(format!(
            "-D {d} runs int8, uint8, int32, uint32, int64, uint64, half, float and double (nccl-tests' device kernels have no {dtype}): pick one of those with -d, or -D 0"
        ));
    }
    Ok(())
}

/// The kernel of implementation `d` of `coll` on `dtype` in device_api.cu.
pub fn kernel_name(coll: Collective, d: i32, dtype: DataType) -> String {
    format!("collbench_dev_{}_{d}_{}", coll.name(), dtype.name())
}

/// Where kernel (coll, d, dtype) sits in [`DeviceKernels`]' table.
fn slot(coll: Collective, d: i32, dtype: DataType) -> Option<usize> {
    let c = COLLECTIVES.iter().position(|&x| x == coll)?;
    let i = IMPLEMENTATIONS.iter().position(|&x| x == d)?;
    let t = TYPES.iter().position(|&x| x == dtype)?;
    Some((c * IMPLEMENTATIONS.len() + i) * TYPES.len() + t)
}

/// Every (collective, implementation, type) the PTX has, in slot order.
fn all_kernels() -> impl Iterator<Item = (Collective, i32, DataType)> {
    COLLECTIVES.into_iter().flat_map(|c| {
        IMPLEMENTATIONS
            .into_iter()
            .flat_map(move |d| TYPES.iter().map(move |&t| (c, d, t)))
    })
}

/// One device-API launch: operands as windows and byte offsets into them.
#[derive(Clone, Copy)]
pub struct Operands<'a> {
    pub send: &'a Window,
    pub send_offset: u64,
    pub recv: &'a Window,
    pub recv_offset: u64,
    /// Elements: the all_reduce count, or alltoall's per-peer count.
    pub count: u64,
    pub root: i32,
}

/// The device kernels loaded on one GPU (load in that device's context).
pub struct DeviceKernels {
    _module: Module,
    functions: Vec<Function>,
}

impl DeviceKernels {
    /// Loads the embedded PTX and every kernel in it.
    pub fn load() -> Result<DeviceKernels, CudaError> {
        let module = Module::load_ptx(PTX)?;
        let functions = all_kernels()
            .map(|(c, d, t)| module.function(&kernel_name(c, d, t)))
            .collect::<Result<_, _>>()?;
        Ok(DeviceKernels {
            _module: module,
            functions,
        })
    }

    /// Launches implementation `d` of `coll` on `dtype` with `ctas` CTAs of
    /// [`THREADS_PER_CTA`] threads on `s`. The case must have passed
    /// [`check_case`].
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &self,
        coll: Collective,
        d: i32,
        dtype: DataType,
        ctas: u32,
        ops: &Operands,
        dev_comm: &DevComm,
        s: &Stream,
    ) -> Result<(), CudaError> {
        let f = slot(coll, d, dtype)
            .map(|i| self.functions[i])
            .ok_or_else(|| CudaError::NoKernel(kernel_name(coll, d, dtype)))?;
        let mut send = ops.send.raw();
        let mut send_offset = ops.send_offset;
        let mut recv = ops.recv.raw();
        let mut recv_offset = ops.recv_offset;
        let mut count = ops.count;
        let mut root = ops.root;
        let mut comm = *dev_comm;
        let mut args = [
            &mut send as *mut _ as *mut c_void,
            &mut send_offset as *mut _ as *mut c_void,
            &mut recv as *mut _ as *mut c_void,
            &mut recv_offset as *mut _ as *mut c_void,
            &mut count as *mut _ as *mut c_void,
            &mut root as *mut _ as *mut c_void,
            &mut comm as *mut _ as *mut c_void,
        ];
        // SAFETY: every collbench_dev_* kernel in device_api.cu takes
        // (ncclWindow_t, size_t, ncclWindow_t, size_t, size_t, int,
        // ncclDevComm): two window handles (pointers) from
        // ncclCommWindowRegister, u64 offsets and count, an i32 root and a
        // repr(C) copy of the 88-byte ncclDevComm (layout asserted in the
        // .cu and tested below), each pointed to by `args` and alive for
        // the call (the driver copies argument values at launch).
        // `_module` keeps the kernel loaded.
        unsafe { f.launch(ctas, THREADS_PER_CTA, &mut args, s) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    const CU: &str = include_str!("../kernels/device_api.cu");

    /// `static_assert(offsetof(STRUCT, FIELD) == N` lines of device_api.cu.
    fn asserted(what: &str) -> u64 {
        let key = format!("{what}) == ");
        let line = CU
            .lines()
            .find(|l| l.starts_with("static_assert(") && l.contains(&key))
            .unwrap_or_else(|| panic!("device_api.cu asserts nothing on {what}"));
        let rest = &line[line.find(&key).unwrap() + key.len()..];
        rest.split(',').next().unwrap().trim().parse().unwrap()
    }

    /// Checks the size and the given field offsets of Rust struct `$t`
    /// against device_api.cu's asserts on C struct `$c` (Rust field =
    /// C field).
    macro_rules! same_layout {
        ($t:ty, $c:literal: $($field:ident = $cfield:literal),+) => {
            assert_eq!(size_of::<$t>() as u64, asserted(concat!("sizeof(", $c)));
            $(assert_eq!(
                offset_of!($t, $field) as u64,
                asserted(concat!("offsetof(", $c, ", ", $cfield)),
                "{}.{}", $c, $cfield
            );)+
        };
    }

    #[test]
    fn dev_comm_layout_is_the_one_device_api_cu_asserts() {
        same_layout!(DevComm, "ncclDevComm": rank = "rank", n_ranks = "nRanks",
            lsa_rank = "lsaRank", lsa_size = "lsaSize", window_table = "windowTable",
            resource_window = "resourceWindow", resource_window_inlined = "resourceWindow_inlined",
            lsa_multimem = "lsaMultimem", lsa_barrier = "lsaBarrier");
        same_layout!(DevCommRequirements, "ncclDevCommRequirements":
            lsa_multimem = "lsaMultimem", lsa_barrier_count = "lsaBarrierCount");
    }

    #[test]
    fn the_embedded_ptx_has_every_kernel_and_suits_the_driver() {
        let mut n = 0;
        for (c, d, t) in all_kernels() {
            let entry = format!(".entry {}(", kernel_name(c, d, t));
            assert!(PTX.contains(&entry), "device_api.ptx lacks {entry}");
            n += 1;
        }
        assert_eq!(n, 36);
        assert_eq!(PTX.matches(".entry ").count(), n);
        // The GPU machines' driver (580, CUDA 13.0) reads PTX 9.0 at most.
        let version = PTX
            .lines()
            .find_map(|l| l.strip_prefix(".version "))
            .expect(".version line");
        let (major, minor) = version.trim().split_once('.').unwrap();
        let v: (u32, u32) = (major.parse().unwrap(), minor.parse().unwrap());
        assert!(v <= (9, 0), "PTX .version {version}");
        assert!(PTX.contains(".target sm_75"), "JIT-able from Turing on");
    }

    #[test]
    fn every_kernel_takes_nccl_tests_arguments() {
        // Seven parameters, the last the 88-byte ncclDevComm by value.
        let name = kernel_name(Collective::AllReduce, 2, DataType::Float);
        let at = PTX.find(&format!(".entry {name}(")).unwrap();
        let params = &PTX[at..at + PTX[at..].find(')').unwrap()];
        assert_eq!(params.matches(".param").count(), 7, "{params}");
        assert!(params.contains(".align 8 .b8 "), "{params}");
        assert!(params.contains("_param_6[88]"), "{params}");
    }

    #[test]
    fn slots_cover_the_table_once() {
        let slots: Vec<usize> = all_kernels()
            .map(|(c, d, t)| slot(c, d, t).unwrap())
            .collect();
        assert_eq!(slots, (0..36).collect::<Vec<_>>());
        assert_eq!(slot(Collective::AllGather, 1, DataType::Float), None);
        assert_eq!(slot(Collective::AllReduce, 3, DataType::Float), None);
        assert_eq!(slot(Collective::AllReduce, 1, DataType::Bfloat16), None);
    }

    #[test]
    fn cta_count_is_nccl_tests_v() {
        assert_eq!(cta_count(None), 16);
        assert_eq!(cta_count(Some(1)), 1);
        assert_eq!(cta_count(Some(128)), 128);
        assert_eq!(cta_count(Some(0)), 16);
        assert_eq!(cta_count(Some(129)), 16);
        assert_eq!(cta_count(Some(-4)), 16);
    }

    #[test]
    fn requirements_ask_one_lsa_barrier_per_cta() {
        let r = DevCommRequirements::lsa_barriers(32);
        assert_eq!(r.lsa_barrier_count, 32);
        assert!(!r.lsa_multimem);
    }

    #[test]
    fn cases_the_device_kernels_run_are_nccl_tests() {
        use Collective::*;
        assert!(check_case(1, AllReduce, DataType::Float, ReduceOp::Sum).is_ok());
        assert!(check_case(2, AllToAll, DataType::Half, ReduceOp::Sum).is_ok());
        // alltoall moves data: its operator column is not a reduction.
        assert!(check_case(1, AllToAll, DataType::Int8, ReduceOp::Prod).is_ok());
        let e = check_case(1, AllGather, DataType::Float, ReduceOp::Sum).unwrap_err();
        assert!(
            e.starts_with("Device implementation 1 is not supported by all_gather"),
            "{e}"
        );
        assert!(e.ends_with("(use -D 0 for all_gather)"), "{e}");
        let e = check_case(2, AllReduce, DataType::Float, ReduceOp::Max).unwrap_err();
        assert_eq!(
            e,
            "-D 2 all_reduce sums only (nccl-tests' device kernels have no max): use -o sum, or -D 0"
        );
        let e = check_case(1, AllToAll, DataType::Bfloat16, ReduceOp::Sum).unwrap_err();
        assert!(e.contains("have no bfloat16"), "{e}");
        assert_eq!(TYPES.last(), Some(&DataType::Double));
        for &t in TYPES {
            assert!(check_case(1, AllReduce, t, ReduceOp::Sum).is_ok(), "{t}");
        }
    }
}
