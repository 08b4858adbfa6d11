//! A safe layer over the CUDA driver API (cudarc's raw bindings, loaded at
//! run time): contexts, streams, events, memory, modules and graphs. Only
//! what the NCCL backend needs; every driver call is wrapped here once.
//!
//! Handles are owned by the types that create them and released in their
//! `Drop`, so a safe method always passes the driver a live handle. Device
//! memory is addressed through [`DevicePtr`], which only a
//! [`DeviceBuffer`] hands out: the driver and NCCL dereference it on the
//! GPU, never as host memory.

use crate::error::CudaError;
use crate::ffi::c_string;
use cudarc::driver::sys as cu;
use std::ffi::{c_char, c_void, CStr, CString};

/// Turns a driver result into an error naming the call.
pub fn check(what: &str, r: cu::CUresult) -> Result<(), CudaError> {
    if r == cu::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut p: *const c_char = std::ptr::null();
    // SAFETY: cuGetErrorString only writes a pointer to a static string
    // into `p` (a valid out-parameter); it is read only when non-null.
    let text = unsafe {
        if cu::cuGetErrorString(r, &mut p) == cu::CUresult::CUDA_SUCCESS && !p.is_null() {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        } else {
            format!("{r:?}")
        }
    };
    Err(CudaError::Call {
        call: what.to_string(),
        code: r as u32,
        text,
    })
}

/// Loads libcuda and initialises the driver.
pub fn init() -> Result<(), CudaError> {
    // SAFETY: probes whether libcuda can be loaded; no arguments.
    if !unsafe { cu::is_culib_present() } {
        return Err(CudaError::NoDriver);
    }
    // SAFETY: cuInit with flags 0 (the only valid value); the library is
    // present (checked above), so the call is resolved.
    check("cuInit", unsafe { cu::cuInit(0) })
}

/// Number of visible CUDA devices.
pub fn device_count() -> Result<usize, CudaError> {
    init()?;
    let mut n = 0;
    // SAFETY: `n` is a valid out-parameter; the driver is initialised.
    check("cuDeviceGetCount", unsafe { cu::cuDeviceGetCount(&mut n) })?;
    Ok(n.max(0) as usize)
}

/// The driver's version as `13.0`.
pub fn driver_version() -> Result<String, CudaError> {
    init()?;
    let mut v = 0;
    // SAFETY: `v` is a valid out-parameter; the driver is initialised.
    check("cuDriverGetVersion", unsafe {
        cu::cuDriverGetVersion(&mut v)
    })?;
    Ok(format!("{}.{}", v / 1000, (v % 1000) / 10))
}

/// One GPU with its primary context.
pub struct Device {
    pub ordinal: usize,
    dev: cu::CUdevice,
    ctx: cu::CUcontext,
}

impl Device {
    /// Retains the primary context of device `ordinal`.
    pub fn open(ordinal: usize) -> Result<Device, CudaError> {
        init()?;
        let mut dev = 0;
        // SAFETY: `dev` is a valid out-parameter; an out-of-range ordinal
        // is reported as CUDA_ERROR_INVALID_DEVICE.
        check("cuDeviceGet", unsafe {
            cu::cuDeviceGet(&mut dev, ordinal as i32)
        })?;
        let mut ctx = std::ptr::null_mut();
        // SAFETY: `dev` came from cuDeviceGet; `ctx` is a valid
        // out-parameter. Drop releases the retained context.
        check("cuDevicePrimaryCtxRetain", unsafe {
            cu::cuDevicePrimaryCtxRetain(&mut ctx, dev)
        })?;
        let d = Device { ordinal, dev, ctx };
        d.bind()?;
        Ok(d)
    }

    /// Makes this device's context current on the calling thread.
    pub fn bind(&self) -> Result<(), CudaError> {
        // SAFETY: `ctx` is the primary context retained in `open` and
        // released only in Drop, so it is alive while `self` is.
        check("cuCtxSetCurrent", unsafe { cu::cuCtxSetCurrent(self.ctx) })
    }

    /// The device's marketing name (`NVIDIA H200`).
    pub fn name(&self) -> String {
        let mut buf = [0 as c_char; 256];
        // SAFETY: the driver writes at most `buf.len()` bytes, NUL included,
        // into `buf`; `dev` is a device handle from cuDeviceGet.
        unsafe { cu::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, self.dev) };
        c_string(&buf)
    }

    /// PCI bus id as nccl-tests prints it (`0000:00:06`).
    pub fn pci_bus_id(&self) -> String {
        let mut buf = [0 as c_char; 64];
        // SAFETY: the driver writes at most `buf.len()` bytes, NUL included,
        // into `buf`; `dev` is a device handle from cuDeviceGet.
        unsafe { cu::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as i32, self.dev) };
        bus_id_as_nccl_tests(&c_string(&buf))
    }

    /// (major, minor) compute capability.
    pub fn compute_capability(&self) -> (i32, i32) {
        let (mut ma, mut mi) = (0, 0);
        // SAFETY: `ma` and `mi` are valid out-parameters; `dev` is a
        // device handle from cuDeviceGet.
        unsafe {
            cu::cuDeviceGetAttribute(
                &mut ma,
                cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                self.dev,
            );
            cu::cuDeviceGetAttribute(
                &mut mi,
                cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                self.dev,
            );
        }
        (ma, mi)
    }

    /// (free, total) bytes of device memory.
    pub fn mem_info(&self) -> (usize, usize) {
        let (mut f, mut t) = (0, 0);
        let _ = self.bind();
        // SAFETY: `f` and `t` are valid out-parameters; the call reads the
        // current context, bound just above.
        unsafe { cu::cuMemGetInfo_v2(&mut f, &mut t) };
        (f, t)
    }
}

/// The driver says `0000:00:06.0`; nccl-tests drops the function number
/// and prints lower case.
fn bus_id_as_nccl_tests(s: &str) -> String {
    s.rsplit_once('.')
        .map(|(a, _)| a)
        .unwrap_or(s)
        .to_ascii_lowercase()
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: balances the cuDevicePrimaryCtxRetain of `open`; the
        // fields of the owners that used this context drop before it.
        unsafe { cu::cuDevicePrimaryCtxRelease_v2(self.dev) };
    }
}

/// A non-blocking stream (or the null stream for `-y 1`).
pub struct Stream(cu::CUstream);

impl Stream {
    /// A new non-blocking stream in the current context, or the null
    /// (default) stream when `null`.
    pub fn new(null: bool) -> Result<Stream, CudaError> {
        if null {
            return Ok(Stream(std::ptr::null_mut()));
        }
        let mut s = std::ptr::null_mut();
        // SAFETY: `s` is a valid out-parameter; Drop destroys the stream.
        check("cuStreamCreate", unsafe {
            cu::cuStreamCreate(&mut s, cu::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        Ok(Stream(s))
    }

    /// True when all work on the stream has finished.
    pub fn query(&self) -> Result<bool, CudaError> {
        // SAFETY: `self.0` is the null stream or one created in `new` and
        // destroyed only in Drop.
        let r = unsafe { cu::cuStreamQuery(self.0) };
        if r == cu::CUresult::CUDA_ERROR_NOT_READY {
            return Ok(false);
        }
        check("cuStreamQuery", r).map(|_| true)
    }

    /// Waits for all work on the stream.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        // SAFETY: a live stream handle (see `query`).
        check("cuStreamSynchronize", unsafe {
            cu::cuStreamSynchronize(self.0)
        })
    }

    /// The handle as NCCL takes it (`cudaStream_t`).
    pub(crate) fn raw(&self) -> *mut c_void {
        self.0 as *mut c_void
    }

    /// Starts capturing work into a graph (`-G`).
    pub fn begin_capture(&self) -> Result<(), CudaError> {
        // SAFETY: a live stream handle (see `query`); thread-local capture
        // mode affects only this thread.
        check("cuStreamBeginCapture", unsafe {
            cu::cuStreamBeginCapture_v2(
                self.0,
                cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        })
    }

    /// Ends the capture. The graph is instantiated separately, after every
    /// GPU's capture has ended: a multi-GPU NCCL group can tie the captures
    /// of several streams together (as nccl-tests orders it, too).
    pub fn end_capture(&self) -> Result<Graph, CudaError> {
        let mut g = std::ptr::null_mut();
        // SAFETY: a live stream handle; `g` is a valid out-parameter, owned
        // by the returned Graph, which destroys it.
        check("cuStreamEndCapture", unsafe {
            cu::cuStreamEndCapture(self.0, &mut g)
        })?;
        Ok(Graph {
            graph: g,
            exec: std::ptr::null_mut(),
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a stream created in `new`, destroyed once, here.
            unsafe { cu::cuStreamDestroy_v2(self.0) };
        }
    }
}

/// A captured CUDA graph, instantiated by [`Graph::instantiate`].
pub struct Graph {
    graph: cu::CUgraph,
    exec: cu::CUgraphExec,
}

impl Graph {
    /// Makes the captured graph launchable.
    pub fn instantiate(&mut self) -> Result<(), CudaError> {
        // SAFETY: `graph` came from cuStreamEndCapture and lives until
        // Drop; `exec` is a valid out-parameter, destroyed in Drop.
        check("cuGraphInstantiate", unsafe {
            cu::cuGraphInstantiateWithFlags(&mut self.exec, self.graph, 0)
        })
    }

    /// Uploads the graph to the device ahead of its first launch, so that
    /// one-time cost stays out of the timed replays.
    pub fn upload(&self, s: &Stream) -> Result<(), CudaError> {
        // SAFETY: `exec` is null (the driver reports an error) or
        // instantiated and alive until Drop; `s` is a live stream.
        check("cuGraphUpload", unsafe {
            cu::cuGraphUpload(self.exec, s.0)
        })
    }

    /// Launches the instantiated graph on `s`.
    pub fn launch(&self, s: &Stream) -> Result<(), CudaError> {
        // SAFETY: as in `upload`.
        check("cuGraphLaunch", unsafe {
            cu::cuGraphLaunch(self.exec, s.0)
        })
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: both handles are owned by this Graph and destroyed once;
        // `exec` only when it was instantiated.
        unsafe {
            if !self.exec.is_null() {
                cu::cuGraphExecDestroy(self.exec);
            }
            cu::cuGraphDestroy(self.graph);
        }
    }
}

/// A timing event.
pub struct Event(cu::CUevent);

impl Event {
    /// A new event in the current context.
    pub fn new() -> Result<Event, CudaError> {
        let mut e = std::ptr::null_mut();
        // SAFETY: `e` is a valid out-parameter; Drop destroys the event.
        check("cuEventCreate", unsafe {
            cu::cuEventCreate(&mut e, cu::CUevent_flags::CU_EVENT_DEFAULT as u32)
        })?;
        Ok(Event(e))
    }

    /// Records the event on `s`.
    pub fn record(&self, s: &Stream) -> Result<(), CudaError> {
        // SAFETY: an event from `new`, alive until Drop; `s` is live.
        check("cuEventRecord", unsafe { cu::cuEventRecord(self.0, s.0) })
    }

    /// Milliseconds from `self` to `end` (both recorded and complete).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, CudaError> {
        let mut ms = 0f32;
        // SAFETY: two live events; `ms` is a valid out-parameter.
        check("cuEventElapsedTime", unsafe {
            cu::cuEventElapsedTime_v2(&mut ms, self.0, end.0)
        })?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: an event from `new`, destroyed once, here.
        unsafe { cu::cuEventDestroy_v2(self.0) };
    }
}

/// An address in device memory, handed out by a [`DeviceBuffer`].
///
/// Offsets are plain arithmetic: an address past the end of an allocation
/// makes the GPU report an illegal address on the stream; it can never
/// name host memory, since it is never dereferenced on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevicePtr(cu::CUdeviceptr);

impl DevicePtr {
    /// An address for tests of offset arithmetic (never dereferenced).
    #[cfg(test)]
    pub(crate) fn from_addr(addr: u64) -> DevicePtr {
        DevicePtr(addr)
    }

    /// `bytes` further on.
    pub fn offset_by(self, bytes: u64) -> DevicePtr {
        DevicePtr(self.0.wrapping_add(bytes))
    }

    /// `bytes` before.
    pub fn back_by(self, bytes: u64) -> DevicePtr {
        DevicePtr(self.0.wrapping_sub(bytes))
    }

    /// The device address as a number.
    pub fn addr(self) -> u64 {
        self.0
    }

    /// The address as a C pointer argument (NCCL's buffers).
    pub(crate) fn as_raw(self) -> *mut c_void {
        self.0 as *mut c_void
    }
}

/// Device memory.
pub struct DeviceBuffer {
    ptr: cu::CUdeviceptr,
    /// Size in bytes.
    pub bytes: usize,
    /// Frees memory that came from another allocator (ncclMemAlloc);
    /// None: cuMemFree.
    free: Option<unsafe extern "C" fn(*mut c_void) -> i32>,
}

impl DeviceBuffer {
    /// Allocates `bytes` (at least 1) on the current context's device.
    pub fn alloc(bytes: usize) -> Result<DeviceBuffer, CudaError> {
        let mut p = 0;
        // SAFETY: `p` is a valid out-parameter; Drop frees the memory.
        check("cuMemAlloc", unsafe {
            cu::cuMemAlloc_v2(&mut p, bytes.max(1))
        })?;
        Ok(DeviceBuffer {
            ptr: p,
            bytes,
            free: None,
        })
    }

    /// Takes ownership of `bytes` at `ptr`, to be released with `free`.
    ///
    /// # Safety
    /// `ptr` must be a device allocation of at least `bytes` that `free`
    /// releases, used by nothing else.
    pub unsafe fn from_raw(
        ptr: *mut c_void,
        bytes: usize,
        free: unsafe extern "C" fn(*mut c_void) -> i32,
    ) -> DeviceBuffer {
        DeviceBuffer {
            ptr: ptr as cu::CUdeviceptr,
            bytes,
            free: Some(free),
        }
    }

    /// The address `offset` bytes into the buffer.
    pub fn at(&self, offset: u64) -> DevicePtr {
        DevicePtr(self.ptr).offset_by(offset)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        match self.free {
            // SAFETY: `from_raw`'s contract: `free` releases this memory,
            // which nothing else frees.
            Some(free) => unsafe {
                free(self.ptr as *mut c_void);
            },
            // SAFETY: memory from cuMemAlloc in `alloc`, freed once, here.
            None => unsafe {
                cu::cuMemFree_v2(self.ptr);
            },
        }
    }
}

/// Fills `bytes` bytes at `ptr` with `value` on `s`.
pub fn memset_async(ptr: DevicePtr, value: u8, bytes: usize, s: &Stream) -> Result<(), CudaError> {
    // SAFETY: `ptr` is a device address (the GPU reports one outside an
    // allocation); `s` is a live stream.
    check("cuMemsetD8Async", unsafe {
        cu::cuMemsetD8Async(ptr.0, value, bytes, s.0)
    })
}

/// Copies `bytes` between device addresses on `s`.
pub fn copy_async(
    dst: DevicePtr,
    src: DevicePtr,
    bytes: usize,
    s: &Stream,
) -> Result<(), CudaError> {
    // SAFETY: both are device addresses (see `memset_async`); `s` is live.
    check("cuMemcpyDtoDAsync", unsafe {
        cu::cuMemcpyDtoDAsync_v2(dst.0, src.0, bytes, s.0)
    })
}

/// Copies device memory to the host (synchronous).
pub fn copy_to_host(dst: &mut [u8], src: DevicePtr) -> Result<(), CudaError> {
    // SAFETY: the driver writes exactly `dst.len()` bytes into `dst`, a
    // live mutable slice; `src` is a device address.
    check("cuMemcpyDtoH", unsafe {
        cu::cuMemcpyDtoH_v2(dst.as_mut_ptr() as *mut c_void, src.0, dst.len())
    })
}

/// Copies host memory to the device (synchronous).
pub fn copy_to_device(dst: DevicePtr, src: &[u8]) -> Result<(), CudaError> {
    // SAFETY: the driver reads exactly `src.len()` bytes of `src`, a live
    // slice; `dst` is a device address.
    check("cuMemcpyHtoD", unsafe {
        cu::cuMemcpyHtoD_v2(dst.0, src.as_ptr() as *const c_void, src.len())
    })
}

/// A loaded PTX module.
pub struct Module(cu::CUmodule);

impl Module {
    /// JIT-loads PTX text in the current context.
    pub fn load_ptx(ptx: &str) -> Result<Module, CudaError> {
        let c = CString::new(ptx).map_err(|_| CudaError::PtxNul)?;
        let mut m = std::ptr::null_mut();
        // SAFETY: `c` is NUL-terminated PTX text that outlives the call;
        // `m` is a valid out-parameter.
        check("cuModuleLoadData", unsafe {
            cu::cuModuleLoadData(&mut m, c.as_ptr() as *const c_void)
        })?;
        Ok(Module(m))
    }

    /// The kernel `name` of this module.
    pub fn function(&self, name: &str) -> Result<Function, CudaError> {
        let c = CString::new(name).expect("kernel name");
        let mut f = std::ptr::null_mut();
        // SAFETY: a loaded module, a NUL-terminated name and a valid
        // out-parameter.
        check(&format!("cuModuleGetFunction({name})"), unsafe {
            cu::cuModuleGetFunction(&mut f, self.0, c.as_ptr())
        })?;
        Ok(Function(f))
    }
}

/// A kernel in a loaded module (valid while its [`Module`] is loaded).
#[derive(Clone, Copy)]
pub struct Function(cu::CUfunction);

impl Function {
    /// Launches with `params` (pointers to each argument value).
    ///
    /// # Safety
    /// `params` must match the kernel's signature, each pointing to a live
    /// value of the parameter's type, and the module must still be loaded.
    pub unsafe fn launch(
        &self,
        grid: u32,
        block: u32,
        params: &mut [*mut c_void],
        s: &Stream,
    ) -> Result<(), CudaError> {
        check(
            "cuLaunchKernel",
            cu::cuLaunchKernel(
                self.0,
                grid,
                1,
                1,
                block,
                1,
                1,
                0,
                s.0,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_id_drops_the_function_and_lowers_case() {
        assert_eq!(bus_id_as_nccl_tests("0000:1A:00.0"), "0000:1a:00");
        assert_eq!(bus_id_as_nccl_tests("0000:06:00"), "0000:06:00");
    }

    #[test]
    fn device_pointers_are_plain_offsets() {
        let p = DevicePtr::from_addr(0x1000);
        assert_eq!(p.offset_by(0x20).addr(), 0x1020);
        assert_eq!(p.offset_by(0x20).back_by(0x10).addr(), 0x1010);
    }
}
