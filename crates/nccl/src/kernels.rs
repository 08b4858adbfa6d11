//! The GPU verification kernels (kernels/verify.cu, embedded as PTX) and
//! the host-side fallback used when they cannot be loaded.

use crate::cuda::{self, DeviceBuffer, Function, Module, Stream};
use collbench_core::collective::RedopUse;
use collbench_core::element::Element;
use collbench_core::verify::{output_source, ulp_distance, Pattern, Source};
use collbench_core::{with_element, DataType};
use collbench_runner::CaseSpec;
use std::ffi::c_void;

/// The PTX built from kernels/verify.cu by kernels/regen-ptx.sh.
const PTX: &str = include_str!("../kernels/verify.ptx");

/// Mirrors `struct Params` in verify.cu.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct KernelParams {
    pub seed: u64,
    pub modulus: u64,
    pub send_count: u64,
    pub recv_count: u64,
    pub param_count: u64,
    pub world: i32,
    pub rank: i32,
    pub root: i32,
    pub coll: i32,
    pub redop: i32,
    pub tol: i32,
}

/// The pattern of a case as the kernels and the host check see it.
pub fn pattern(case: &CaseSpec, seed: u64) -> Pattern {
    let c = case;
    Pattern {
        seed,
        world_size: c.world_size,
        dtype: c.dtype,
        redop: (c.collective.spec().redop == RedopUse::Reduces).then_some(c.redop),
    }
}

impl KernelParams {
    /// Parameters for `rank` of `case` with pattern seed `seed`.
    pub fn new(case: &CaseSpec, rank: usize, seed: u64) -> KernelParams {
        let c = case;
        let p = pattern(case, seed);
        KernelParams {
            seed,
            modulus: p.modulus(),
            send_count: c.counts.send_count,
            recv_count: c.counts.recv_count,
            param_count: c.counts.param_count,
            world: c.world_size as i32,
            rank: rank as i32,
            root: c.root as i32,
            coll: c.collective as i32,
            redop: p.redop.map(|o| o as i32).unwrap_or(-1),
            tol: p.tolerance_ulps() as i32,
        }
    }
}

/// Loaded kernels on one device (load in that device's context).
pub struct Kernels {
    _module: Module,
    fill: [Function; 12],
    check: [Function; 12],
    wrong: DeviceBuffer,
}

fn index(t: DataType) -> usize {
    DataType::ALL
        .iter()
        .position(|&d| d == t)
        .expect("known type")
}

impl Kernels {
    /// Loads the embedded PTX, or the file named by COLLBENCH_PTX (for
    /// trying regenerated kernels without a rebuild).
    pub fn load() -> Result<Kernels, String> {
        let text = match std::env::var("COLLBENCH_PTX") {
            Ok(path) => std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read COLLBENCH_PTX={path}: {e}"))?,
            Err(_) => PTX.to_string(),
        };
        if !text.contains(".entry") {
            return Err("the embedded verification PTX is empty (regenerate it with crates/nccl/kernels/regen-ptx.sh)".into());
        }
        let module = Module::load_ptx(&text)?;
        let get = |kind: &str| -> Result<[Function; 12], String> {
            let v: Vec<Function> = DataType::ALL
                .iter()
                .map(|t| module.function(&format!("collbench_{kind}_{}", t.name())))
                .collect::<Result<_, _>>()?;
            Ok(v.try_into().unwrap_or_else(|_| unreachable!()))
        };
        Ok(Kernels {
            fill: get("fill")?,
            check: get("check")?,
            wrong: DeviceBuffer::alloc(8)?,
            _module: module,
        })
    }

    fn grid(n: u64) -> u32 {
        (n.div_ceil(256)).clamp(1, 132 * 16) as u32
    }

    /// Counts wrong elements of `out` (recv_count elements); waits for the
    /// result.
    pub fn check(
        &self,
        out: *const c_void,
        p: &KernelParams,
        dtype: DataType,
        s: &Stream,
    ) -> Result<u64, String> {
        cuda::memset_async(self.wrong.as_ptr(0), 0, 8, s)?;
        let mut p = *p;
        let mut o = out;
        let mut w = self.wrong.ptr;
        let mut args = [
            &mut o as *mut _ as *mut c_void,
            &mut p as *mut _ as *mut c_void,
            &mut w as *mut _ as *mut c_void,
        ];
        unsafe { self.check[index(dtype)].launch(Self::grid(p.recv_count), 256, &mut args, s)? };
        s.synchronize()?;
        let mut bytes = [0u8; 8];
        cuda::copy_to_host(&mut bytes, self.wrong.as_ptr(0))?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// Writes the input pattern into `buf` (send_count elements of `dtype`).
    pub fn fill(
        &self,
        buf: *mut c_void,
        p: &KernelParams,
        dtype: DataType,
        s: &Stream,
    ) -> Result<(), String> {
        let mut p = *p;
        let mut b = buf;
        let mut args = [
            &mut b as *mut _ as *mut c_void,
            &mut p as *mut _ as *mut c_void,
        ];
        unsafe { self.fill[index(dtype)].launch(Self::grid(p.send_count), 256, &mut args, s) }
    }
}

/// Host fallback: the input pattern of `rank` as bytes.
pub fn host_input(case: &CaseSpec, rank: usize, seed: u64) -> Vec<u8> {
    let p = pattern(case, seed);
    let n = case.counts.send_count as usize;
    with_element!(case.dtype, T => {
        let v: Vec<T> = (0..n).map(|i| T::from_value(p.input(rank, i as u64))).collect();
        as_bytes(&v).to_vec()
    })
}

/// Host fallback: wrong elements in `out` (raw bytes of recv_count elements).
pub fn host_check(case: &CaseSpec, rank: usize, seed: u64, out: &[u8]) -> u64 {
    let p = pattern(case, seed);
    let c = case;
    let tol = p.tolerance_ulps();
    let elt = c.dtype.size_bytes();
    with_element!(c.dtype, T => {
        let n = out.len() / elt;
        let mut wrong = 0u64;
        for j in 0..n {
            let src = output_source(c.collective, &c.counts, c.world_size, rank, c.root, j as u64);
            if src == Source::Unchecked {
                continue;
            }
            let want = T::from_value(p.expected(src).unwrap_or(f64::NAN)).bits();
            let mut raw = [0u8; 8];
            raw[..elt].copy_from_slice(&out[j * elt..(j + 1) * elt]);
            let got = u64::from_le_bytes(raw);
            let want = want & if elt == 8 { u64::MAX } else { (1u64 << (elt * 8)) - 1 };
            if got != want && (tol == 0 || ulp_distance(got, want, elt) > tol) {
                wrong += 1;
            }
        }
        wrong
    })
}

fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: plain-old-data element types, read as bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// The bytes of one element of `dtype` with value `v` (premulsum scalars).
pub fn scalar_bytes(dtype: DataType, v: f64) -> Vec<u8> {
    with_element!(dtype, T => as_bytes(&[T::from_value(v)]).to_vec())
}
