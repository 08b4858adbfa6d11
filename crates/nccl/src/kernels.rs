//! The GPU verification kernels (kernels/verify.cu, embedded as PTX) and
//! the host-side fallback used when they cannot be loaded.

use crate::cuda::{self, DeviceBuffer, DevicePtr, Function, Module, Stream};
use crate::error::CudaError;
use collbench_core::alltoallv::PeerCounts;
use collbench_core::collective::RedopUse;
use collbench_core::element::Element;
use collbench_core::verify::{is_wrong, Pattern, Source};
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

/// Why the kernels could not be loaded (the backend then checks on the
/// host).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// COLLBENCH_PTX names a file that cannot be read.
    #[error("cannot read COLLBENCH_PTX={path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// The PTX has no kernels (a placeholder checked in without nvcc).
    #[error("the embedded verification PTX is empty (regenerate it with crates/nccl/kernels/regen-ptx.sh)")]
    Empty,
    /// The driver refused the module or a kernel.
    #[error(transparent)]
    Cuda(#[from] CudaError),
}

/// Loaded kernels on one device (load in that device's context).
pub struct Kernels {
    _module: Module,
    fill: [Function; 12],
    check: [Function; 12],
    /// alltoallv's check, which takes the rank's segments.
    check_alltoallv: [Function; 12],
    wrong: DeviceBuffer,
}

/// alltoallv's layout for `rank` as `collbench_check_alltoallv_*` takes it:
/// per source rank, in rank order, (start in `rank`'s output, elements,
/// start in the source's input).
pub fn alltoallv_segments(peers: &PeerCounts, rank: usize) -> Vec<u64> {
    (0..peers.world_size())
        .flat_map(|src| {
            [
                peers.recv_displ(rank, src),
                peers.count(src, rank),
                peers.send_displ(src, rank),
            ]
        })
        .collect()
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
    pub fn load() -> Result<Kernels, LoadError> {
        let text = match std::env::var("COLLBENCH_PTX") {
            Ok(path) => {
                std::fs::read_to_string(&path).map_err(|source| LoadError::Read { path, source })?
            }
            Err(_) => PTX.to_string(),
        };
        if !text.contains(".entry") {
            return Err(LoadError::Empty);
        }
        let module = Module::load_ptx(&text)?;
        let get = |kind: &str| -> Result<[Function; 12], CudaError> {
            let v: Vec<Function> = DataType::ALL
                .iter()
                .map(|t| module.function(&format!("collbench_{kind}_{}", t.name())))
                .collect::<Result<_, _>>()?;
            Ok(v.try_into().unwrap_or_else(|_| unreachable!()))
        };
        Ok(Kernels {
            fill: get("fill")?,
            check: get("check")?,
            check_alltoallv: get("check_alltoallv")?,
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
        out: DevicePtr,
        p: &KernelParams,
        dtype: DataType,
        s: &Stream,
    ) -> Result<u64, CudaError> {
        self.count_wrong(out, p, dtype, None, s)
    }

    /// [`Kernels::check`] for alltoallv: `segs` holds the rank's
    /// [`alltoallv_segments`], copied to the device here.
    pub fn check_alltoallv(
        &self,
        out: DevicePtr,
        p: &KernelParams,
        dtype: DataType,
        segs: &[u64],
        s: &Stream,
    ) -> Result<u64, CudaError> {
        assert_eq!(segs.len(), 3 * p.world as usize, "one segment per rank");
        let bytes: Vec<u8> = segs.iter().flat_map(|v| v.to_le_bytes()).collect();
        let table = DeviceBuffer::alloc(bytes.len())?;
        s.synchronize()?;
        cuda::copy_to_device(table.at(0), &bytes)?;
        self.count_wrong(out, p, dtype, Some(&table), s)
    }

    /// Launches the check kernel of `dtype` (alltoallv's when `segs` is
    /// given) and reads back its count.
    fn count_wrong(
        &self,
        out: DevicePtr,
        p: &KernelParams,
        dtype: DataType,
        segs: Option<&DeviceBuffer>,
        s: &Stream,
    ) -> Result<u64, CudaError> {
        cuda::memset_async(self.wrong.at(0), 0, 8, s)?;
        let mut p = *p;
        let mut o = out.addr();
        let mut w = self.wrong.at(0).addr();
        let mut t = segs.map(|b| b.at(0).addr()).unwrap_or(0);
        let grid = Self::grid(p.recv_count);
        let p_arg = &mut p as *mut _ as *mut c_void;
        let o_arg = &mut o as *mut _ as *mut c_void;
        let w_arg = &mut w as *mut _ as *mut c_void;
        match segs {
            // SAFETY: collbench_check_<type>(const T* out, Params p, u64*
            // wrong) in verify.cu: two device addresses (u64,
            // pointer-sized) and a repr(C) copy of Params, each pointed to
            // by the array and alive for the call (the driver copies
            // argument values at launch). `wrong` is this struct's own
            // 8-byte buffer; `_module` keeps the kernel loaded.
            None => unsafe {
                self.check[index(dtype)].launch(grid, 256, &mut [o_arg, p_arg, w_arg], s)?
            },
            // SAFETY: as above for collbench_check_alltoallv_<type>(const
            // T* out, Params p, const u64* segs, u64* wrong); `segs` is a
            // live device buffer of 3 * world u64 (checked by the caller),
            // which outlives the kernel: the stream is synchronised below
            // before the caller drops it.
            Some(_) => unsafe {
                let t_arg = &mut t as *mut _ as *mut c_void;
                self.check_alltoallv[index(dtype)].launch(
                    grid,
                    256,
                    &mut [o_arg, p_arg, t_arg, w_arg],
                    s,
                )?
            },
        }
        s.synchronize()?;
        let mut bytes = [0u8; 8];
        cuda::copy_to_host(&mut bytes, self.wrong.at(0))?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// Writes the input pattern into `buf` (send_count elements of `dtype`).
    pub fn fill(
        &self,
        buf: DevicePtr,
        p: &KernelParams,
        dtype: DataType,
        s: &Stream,
    ) -> Result<(), CudaError> {
        let mut p = *p;
        let mut b = buf.addr();
        let mut args = [
            &mut b as *mut _ as *mut c_void,
            &mut p as *mut _ as *mut c_void,
        ];
        // SAFETY: collbench_fill_<type>(T* buf, Params p) in verify.cu: a
        // device address (u64, pointer-sized) and a repr(C) copy of Params,
        // pointed to by `args` and alive for the call; `_module` keeps the
        // kernel loaded.
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

/// Host fallback: wrong elements in `out` (raw bytes of recv_count
/// elements); `peers` is alltoallv's layout (`None` for the others).
pub fn host_check(
    case: &CaseSpec,
    rank: usize,
    seed: u64,
    peers: Option<&PeerCounts>,
    out: &[u8],
) -> u64 {
    let p = pattern(case, seed);
    let c = case;
    let tol = p.tolerance_ulps();
    let elt = c.dtype.size_bytes();
    with_element!(c.dtype, T => {
        let n = out.len() / elt;
        let mut wrong = 0u64;
        for j in 0..n {
            let src = c.output_source(rank, j as u64, peers);
            if src == Source::Unchecked {
                continue;
            }
            let want = T::from_value(p.expected(src).unwrap_or(f64::NAN)).bits();
            let mut raw = [0u8; 8];
            raw[..elt].copy_from_slice(&out[j * elt..(j + 1) * elt]);
            let got = u64::from_le_bytes(raw);
            let want = want & if elt == 8 { u64::MAX } else { (1u64 << (elt * 8)) - 1 };
            if is_wrong(got, want, tol, elt) {
                wrong += 1;
            }
        }
        wrong
    })
}

fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: the element types (integers, floats, half, f8) are plain
    // data without padding, so all size_of_val(v) bytes behind the live
    // slice are initialised; the byte view borrows `v`, so it cannot
    // outlive it.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// The bytes of one element of `dtype` with value `v` (premulsum scalars).
pub fn scalar_bytes(dtype: DataType, v: f64) -> Vec<u8> {
    with_element!(dtype, T => as_bytes(&[T::from_value(v)]).to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::alltoallv::{Traffic, TrafficMatrix};
    use collbench_core::Collective;

    fn matrix_peers() -> PeerCounts {
        // Bytes, row = sender: 0 sends 32 to 1; 1 sends 48 to 0 and 16 to
        // 2; 2 sends 64 to 1. Floats: counts / 4.
        let m = TrafficMatrix::parse("t", "0 32 0\n48 0 16\n0 64 0\n", None).unwrap();
        Traffic::Matrix(m).peer_counts(0, 4, 3)
    }

    #[test]
    fn segments_list_each_source_in_rank_order() {
        let peers = matrix_peers();
        // Rank 1 receives 8 floats from 0 (its input 0..8), none from
        // itself (whose segment would start after the 12 it sends to 0),
        // 16 from 2 (its input 0..16).
        assert_eq!(alltoallv_segments(&peers, 1), [0, 8, 0, 8, 0, 12, 8, 16, 0]);
        // Rank 2 receives 4 from 1, which sends 12 to rank 0 first.
        assert_eq!(alltoallv_segments(&peers, 2), [0, 0, 8, 0, 4, 12, 4, 0, 16]);
    }

    #[test]
    fn host_check_of_alltoallv_follows_the_segments() {
        let peers = matrix_peers();
        let traffic =
            Traffic::Matrix(TrafficMatrix::parse("t", "0 32 0\n48 0 16\n0 64 0\n", None).unwrap());
        // Built here, not with the backend's test helper: kernels sits
        // below the backend and does not import it.
        let case = CaseSpec {
            collective: Collective::AllToAllV,
            dtype: DataType::Float,
            redop: collbench_core::ReduceOp::Sum,
            root: 0,
            counts: traffic.counts(96, 4, 3),
            in_place: false,
            world_size: 3,
        };
        let p = pattern(&case, 7);
        // Rank 1's output as it should be: 8 of rank 0's input, then 16
        // of rank 2's; the buffer is sized for the busiest rank (24).
        let want: Vec<f32> = (0..8)
            .map(|i| p.input(0, i) as f32)
            .chain((0..16).map(|i| p.input(2, i) as f32))
            .collect();
        let mut bytes = as_bytes(&want).to_vec();
        assert_eq!(host_check(&case, 1, 7, Some(&peers), &bytes), 0);
        // A segment from the wrong place shows: rank 2's first element.
        bytes[8 * 4..9 * 4].copy_from_slice(&(p.input(2, 1) as f32).to_le_bytes());
        assert_eq!(host_check(&case, 1, 7, Some(&peers), &bytes), 1);
    }
}

/// The Rust <-> CUDA contract, read from kernels/verify.cu as written: the
/// enum values the kernels compare `coll` and `redop` with, the layout of
/// `struct Params`, and one kernel pair per data type.
#[cfg(test)]
mod cu_contract {
    use super::KernelParams;
    use collbench_core::{Collective, DataType, ReduceOp};
    use std::collections::BTreeMap;
    use std::mem::offset_of;

    const CU: &str = include_str!("../kernels/verify.cu");

    /// Every C `enum { A, B = 4, C };` in the file, as name -> value.
    fn enums() -> Vec<BTreeMap<String, i64>> {
        let mut out = Vec::new();
        let mut rest = CU;
        while let Some(at) = rest.find("enum {") {
            let body = &rest[at + "enum {".len()..];
            let end = body.find('}').expect("enum closes");
            let mut next = 0;
            let mut map = BTreeMap::new();
            for item in body[..end]
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                let (name, value) = match item.split_once('=') {
                    Some((n, v)) => (n.trim(), v.trim().parse().expect("integer value")),
                    None => (item, next),
                };
                map.insert(name.to_string(), value);
                next = value + 1;
            }
            out.push(map);
            rest = &body[end..];
        }
        out
    }

    /// The enum that holds `member`.
    /// `cu` holds exactly the Rust enum's members (name, value), each
    /// under its name in upper case.
    fn assert_same_members(cu: &BTreeMap<String, i64>, rust: Vec<(&str, i64)>) {
        assert_eq!(cu.len(), rust.len(), "{cu:?}");
        for (name, value) in rust {
            let name = name.to_ascii_uppercase();
            assert_eq!(cu.get(&name), Some(&value), "{name} in verify.cu");
        }
    }

    fn enum_with(member: &str) -> BTreeMap<String, i64> {
        enums()
            .into_iter()
            .find(|e| e.contains_key(member))
            .unwrap_or_else(|| panic!("verify.cu has no enum with {member}"))
    }

    #[test]
    fn collective_values_match_verify_cu() {
        let cu = enum_with("ALL_REDUCE");
        let rust = Collective::ALL.iter().map(|&c| (c.name(), c as i64));
        assert_same_members(&cu, rust.collect());
    }

    #[test]
    fn reduce_op_values_match_verify_cu() {
        let rust = ReduceOp::ALL.iter().map(|&op| (op.name(), op as i64));
        assert_same_members(&enum_with("SUM"), rust.collect());
    }

    #[test]
    fn every_enum_value_the_kernels_switch_on_is_known() {
        // `case X:` labels in verify.cu name only members of the two enums.
        let known: Vec<String> = enums().into_iter().flat_map(|e| e.into_keys()).collect();
        for line in CU.lines() {
            for part in line.split("case ").skip(1) {
                let label = part.split(':').next().unwrap().trim();
                assert!(
                    known.iter().any(|k| k == label),
                    "case {label} is no enum member"
                );
            }
        }
    }

    #[test]
    fn params_layout_matches_verify_cu() {
        let body = CU.split("struct Params {").nth(1).expect("struct Params");
        let body = &body[..body.find("};").expect("Params closes")];
        let mut offset = 0usize;
        let mut fields = 0;
        for line in body.lines() {
            let decl = line.split("//").next().unwrap().trim();
            let Some(decl) = decl.strip_suffix(';') else {
                continue;
            };
            let (ty, name) = decl.split_once(' ').expect("type and name");
            let size = match ty {
                "u64" => 8,
                "int" => 4,
                other => panic!("unexpected field type {other}"),
            };
            offset = offset.next_multiple_of(size);
            let rust = match name.trim() {
                "seed" => offset_of!(KernelParams, seed),
                "modulus" => offset_of!(KernelParams, modulus),
                "send_count" => offset_of!(KernelParams, send_count),
                "recv_count" => offset_of!(KernelParams, recv_count),
                "param_count" => offset_of!(KernelParams, param_count),
                "world" => offset_of!(KernelParams, world),
                "rank" => offset_of!(KernelParams, rank),
                "root" => offset_of!(KernelParams, root),
                "coll" => offset_of!(KernelParams, coll),
                "redop" => offset_of!(KernelParams, redop),
                "tol" => offset_of!(KernelParams, tol),
                other => panic!("Params.{other} has no KernelParams field"),
            };
            assert_eq!(rust, offset, "Params.{name}");
            offset += size;
            fields += 1;
        }
        assert_eq!(fields, 11);
        assert_eq!(
            std::mem::size_of::<KernelParams>(),
            offset.next_multiple_of(8)
        );
    }

    #[test]
    fn every_data_type_has_its_kernels() {
        for t in DataType::ALL {
            let line = format!("KERNELS({}, ", t.name());
            assert!(CU.contains(&line), "verify.cu lacks {line}...)");
        }
        assert_eq!(CU.matches("\nKERNELS(").count(), DataType::ALL.len());
        for t in DataType::ALL {
            let line = format!("ALLTOALLV_KERNELS({}, ", t.name());
            assert!(CU.contains(&line), "verify.cu lacks {line}...)");
        }
    }

    #[test]
    fn the_embedded_ptx_has_every_entry() {
        for t in DataType::ALL {
            for kind in ["fill", "check", "check_alltoallv"] {
                let entry = format!(".entry collbench_{kind}_{}(", t.name());
                assert!(super::PTX.contains(&entry), "verify.ptx lacks {entry}");
            }
        }
    }
}
