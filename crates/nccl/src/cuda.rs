//! A thin, safe-ish layer over the CUDA driver API (cudarc's raw bindings,
//! loaded at run time): contexts, streams, events, memory, modules and
//! graphs. Only what the NCCL backend needs.

use cudarc::driver::sys as cu;
use std::ffi::{c_void, CStr, CString};

/// Turns a driver result into an error naming the call.
pub fn check(what: &str, r: cu::CUresult) -> Result<(), String> {
    if r == cu::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut p: *const std::ffi::c_char = std::ptr::null();
    let msg = unsafe {
        if cu::cuGetErrorString(r, &mut p) == cu::CUresult::CUDA_SUCCESS && !p.is_null() {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        } else {
            format!("{r:?}")
        }
    };
    Err(format!("{what} failed: {msg}"))
}

/// Loads libcuda and initialises the driver.
pub fn init() -> Result<(), String> {
    if !unsafe { cu::is_culib_present() } {
        return Err("no CUDA driver found (libcuda.so.1 is not loadable)".into());
    }
    check("cuInit", unsafe { cu::cuInit(0) })
}

/// Number of visible CUDA devices.
pub fn device_count() -> Result<usize, String> {
    init()?;
    let mut n = 0;
    check("cuDeviceGetCount", unsafe { cu::cuDeviceGetCount(&mut n) })?;
    Ok(n.max(0) as usize)
}

/// The driver's version as `13.0`.
pub fn driver_version() -> Result<String, String> {
    init()?;
    let mut v = 0;
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

unsafe impl Send for Device {}
unsafe impl Sync for Device {}

impl Device {
    /// Retains the primary context of device `ordinal`.
    pub fn open(ordinal: usize) -> Result<Device, String> {
        init()?;
        let mut dev = 0;
        check("cuDeviceGet", unsafe {
            cu::cuDeviceGet(&mut dev, ordinal as i32)
        })?;
        let mut ctx = std::ptr::null_mut();
        check("cuDevicePrimaryCtxRetain", unsafe {
            cu::cuDevicePrimaryCtxRetain(&mut ctx, dev)
        })?;
        let d = Device { ordinal, dev, ctx };
        d.bind()?;
        Ok(d)
    }

    /// Makes this device's context current on the calling thread.
    pub fn bind(&self) -> Result<(), String> {
        check("cuCtxSetCurrent", unsafe { cu::cuCtxSetCurrent(self.ctx) })
    }

    pub fn name(&self) -> String {
        let mut buf = [0 as std::ffi::c_char; 256];
        unsafe { cu::cuDeviceGetName(buf.as_mut_ptr(), 256, self.dev) };
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    /// PCI bus id as nccl-tests prints it (`0000:00:06`).
    pub fn pci_bus_id(&self) -> String {
        let mut buf = [0 as std::ffi::c_char; 64];
        unsafe { cu::cuDeviceGetPCIBusId(buf.as_mut_ptr(), 64, self.dev) };
        let s = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        // The driver says 0000:00:06.0; nccl-tests drops the function.
        s.rsplit_once('.')
            .map(|(a, _)| a.to_string())
            .unwrap_or(s)
            .to_ascii_lowercase()
    }

    /// (major, minor) compute capability.
    pub fn compute_capability(&self) -> (i32, i32) {
        let (mut ma, mut mi) = (0, 0);
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
        unsafe { cu::cuMemGetInfo_v2(&mut f, &mut t) };
        (f, t)
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        unsafe { cu::cuDevicePrimaryCtxRelease_v2(self.dev) };
    }
}

/// A non-blocking stream (or the null stream for `-y 1`).
pub struct Stream(pub cu::CUstream);
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

impl Stream {
    pub fn new(null: bool) -> Result<Stream, String> {
        if null {
            return Ok(Stream(std::ptr::null_mut()));
        }
        let mut s = std::ptr::null_mut();
        check("cuStreamCreate", unsafe {
            cu::cuStreamCreate(&mut s, cu::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
        })?;
        Ok(Stream(s))
    }

    /// True when all work on the stream has finished.
    pub fn query(&self) -> Result<bool, String> {
        let r = unsafe { cu::cuStreamQuery(self.0) };
        if r == cu::CUresult::CUDA_ERROR_NOT_READY {
            return Ok(false);
        }
        check("cuStreamQuery", r).map(|_| true)
    }

    pub fn synchronize(&self) -> Result<(), String> {
        check("cuStreamSynchronize", unsafe {
            cu::cuStreamSynchronize(self.0)
        })
    }

    pub fn raw(&self) -> *mut c_void {
        self.0 as *mut c_void
    }

    /// Starts capturing work into a graph (`-G`).
    pub fn begin_capture(&self) -> Result<(), String> {
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
    pub fn end_capture(&self) -> Result<Graph, String> {
        let mut g = std::ptr::null_mut();
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
            unsafe { cu::cuStreamDestroy_v2(self.0) };
        }
    }
}

/// A captured CUDA graph, instantiated by [`Graph::instantiate`].
pub struct Graph {
    graph: cu::CUgraph,
    exec: cu::CUgraphExec,
}
unsafe impl Send for Graph {}

impl Graph {
    /// Makes the captured graph launchable.
    pub fn instantiate(&mut self) -> Result<(), String> {
        check("cuGraphInstantiate", unsafe {
            cu::cuGraphInstantiateWithFlags(&mut self.exec, self.graph, 0)
        })
    }

    /// Uploads the graph to the device ahead of its first launch, so that
    /// one-time cost stays out of the timed replays.
    pub fn upload(&self, s: &Stream) -> Result<(), String> {
        check("cuGraphUpload", unsafe {
            cu::cuGraphUpload(self.exec, s.0)
        })
    }

    pub fn launch(&self, s: &Stream) -> Result<(), String> {
        check("cuGraphLaunch", unsafe {
            cu::cuGraphLaunch(self.exec, s.0)
        })
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
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
unsafe impl Send for Event {}

impl Event {
    pub fn new() -> Result<Event, String> {
        let mut e = std::ptr::null_mut();
        check("cuEventCreate", unsafe {
            cu::cuEventCreate(&mut e, cu::CUevent_flags::CU_EVENT_DEFAULT as u32)
        })?;
        Ok(Event(e))
    }
    pub fn record(&self, s: &Stream) -> Result<(), String> {
        check("cuEventRecord", unsafe { cu::cuEventRecord(self.0, s.0) })
    }
    /// Milliseconds from `self` to `end` (both recorded and complete).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, String> {
        let mut ms = 0f32;
        check("cuEventElapsedTime", unsafe {
            cu::cuEventElapsedTime_v2(&mut ms, self.0, end.0)
        })?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        unsafe { cu::cuEventDestroy_v2(self.0) };
    }
}

/// Device memory.
pub struct DeviceBuffer {
    pub ptr: cu::CUdeviceptr,
    pub bytes: usize,
    /// Frees memory that came from another allocator (ncclMemAlloc);
    /// None: cuMemFree.
    free: Option<unsafe extern "C" fn(*mut c_void) -> i32>,
}
unsafe impl Send for DeviceBuffer {}

impl DeviceBuffer {
    /// Allocates `bytes` (at least 1) on the current context's device.
    pub fn alloc(bytes: usize) -> Result<DeviceBuffer, String> {
        let mut p = 0;
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

    pub fn as_ptr(&self, offset: usize) -> *mut c_void {
        (self.ptr + offset as u64) as *mut c_void
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        match self.free {
            Some(free) => unsafe {
                free(self.ptr as *mut c_void);
            },
            None => unsafe {
                cu::cuMemFree_v2(self.ptr);
            },
        }
    }
}

/// Fills `bytes` bytes at `ptr` with `value` on `s`.
pub fn memset_async(ptr: *mut c_void, value: u8, bytes: usize, s: &Stream) -> Result<(), String> {
    check("cuMemsetD8Async", unsafe {
        cu::cuMemsetD8Async(ptr as u64, value, bytes, s.0)
    })
}

/// Copies device memory to the host (synchronous).
pub fn copy_to_host(dst: &mut [u8], src: *const c_void) -> Result<(), String> {
    check("cuMemcpyDtoH", unsafe {
        cu::cuMemcpyDtoH_v2(dst.as_mut_ptr() as *mut c_void, src as u64, dst.len())
    })
}

/// Copies host memory to the device (synchronous).
pub fn copy_to_device(dst: *mut c_void, src: &[u8]) -> Result<(), String> {
    check("cuMemcpyHtoD", unsafe {
        cu::cuMemcpyHtoD_v2(dst as u64, src.as_ptr() as *const c_void, src.len())
    })
}

/// A loaded PTX module.
pub struct Module(cu::CUmodule);
unsafe impl Send for Module {}

impl Module {
    /// JIT-loads PTX text in the current context.
    pub fn load_ptx(ptx: &str) -> Result<Module, String> {
        let c = CString::new(ptx).map_err(|_| "PTX contains a NUL byte".to_string())?;
        let mut m = std::ptr::null_mut();
        check("cuModuleLoadData", unsafe {
            cu::cuModuleLoadData(&mut m, c.as_ptr() as *const c_void)
        })?;
        Ok(Module(m))
    }

    pub fn function(&self, name: &str) -> Result<Function, String> {
        let c = CString::new(name).expect("kernel name");
        let mut f = std::ptr::null_mut();
        check(&format!("cuModuleGetFunction({name})"), unsafe {
            cu::cuModuleGetFunction(&mut f, self.0, c.as_ptr())
        })?;
        Ok(Function(f))
    }
}

/// A kernel in a loaded module.
#[derive(Clone, Copy)]
pub struct Function(cu::CUfunction);
unsafe impl Send for Function {}
unsafe impl Sync for Function {}

impl Function {
    /// Launches with `params` (pointers to each argument value).
    ///
    /// # Safety
    /// `params` must match the kernel's signature.
    pub unsafe fn launch(
        &self,
        grid: u32,
        block: u32,
        params: &mut [*mut c_void],
        s: &Stream,
    ) -> Result<(), String> {
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
