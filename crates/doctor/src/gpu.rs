//! CUDA driver and GPU health through NVML, both loaded at run time so the
//! binary runs (and skips these checks) on machines without NVIDIA's
//! driver.

use super::{Check, Status};
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, EccCounter, MemoryError, RetirementCause};
use nvml_wrapper::{Device, Nvml};

/// libcuda loadable, and the CUDA version its driver supports.
pub fn cuda_driver() -> Check {
    // SAFETY: libcuda's initialisers are benign; cuDriverGetVersion may be
    // called before cuInit and only writes the int it is given.
    let version = unsafe {
        libloading::Library::new("libcuda.so.1").map(|lib| {
            let mut v: i32 = 0;
            let ok = lib
                .get::<unsafe extern "C" fn(*mut i32) -> i32>(b"cuDriverGetVersion\0")
                .map(|f| f(&mut v) == 0)
                .unwrap_or(false);
            ok.then_some(v)
        })
    };
    judge_cuda_driver(version.map_err(|e| e.to_string()))
}

/// `Err`: libcuda not loadable; `Ok(None)`: loaded but no version.
pub fn judge_cuda_driver(version: Result<Option<i32>, String>) -> Check {
    match version {
        Ok(Some(v)) => Check::new(
            "cuda driver",
            Status::Pass,
            format!("libcuda.so.1 loaded, supports CUDA {}.{}", v / 1000, (v % 1000) / 10),
            "",
        ),
        Ok(None) => Check::new(
            "cuda driver",
            Status::Fail,
            "libcuda.so.1 loaded but cuDriverGetVersion failed",
            "reinstall the NVIDIA driver (libcuda.so.1 does not match the kernel module?)",
        ),
        Err(e) => Check::new(
            "cuda driver",
            Status::Skip,
            format!("libcuda.so.1 not loadable ({})", first_line(&e)),
            "no NVIDIA driver on this machine; in a container, run with the NVIDIA runtime (--gpus all)",
        ),
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

/// One line per GPU aspect, or one SKIP line when NVML is missing.
pub fn nvml_checks() -> Vec<Check> {
    let nvml = match Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            return vec![Check::new(
                "gpus",
                Status::Skip,
                format!("NVML not available ({}): GPU checks skipped", first_line(&e.to_string())),
                "no NVIDIA driver here (libnvidia-ml.so.1); on a GPU node install the driver or mount it into the container",
            )]
        }
    };
    let count = nvml.device_count().unwrap_or(0);
    let driver = nvml.sys_driver_version().unwrap_or_else(|_| "?".into());
    if count == 0 {
        return vec![Check::new(
            "gpus",
            Status::Skip,
            format!("NVML loaded (driver {driver}) but it sees no GPU"),
            "check CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES and `nvidia-smi`",
        )];
    }
    let mut out = vec![Check::new(
        "gpus",
        Status::Pass,
        format!("{count} GPU(s), driver {driver}"),
        "",
    )];
    for i in 0..count {
        match nvml.device_by_index(i) {
            Ok(d) => out.extend(device_checks(i, &d)),
            Err(e) => out.push(Check::new(
                &format!("gpu{i}"),
                Status::Fail,
                format!("NVML cannot open it: {e}"),
                "run nvidia-smi; a GPU that NVML cannot open usually needs a reset or a reboot",
            )),
        }
    }
    out
}

/// What NVML says about one GPU's memory health.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EccState {
    /// Uncorrected ECC errors since the driver loaded; `None` when ECC is
    /// off or unsupported.
    pub uncorrected_volatile: Option<u64>,
    /// Pages retired for double-bit errors (pre-Ampere), where supported.
    pub retired_double_bit: Option<usize>,
    /// Remapped rows (Ampere and newer): (correctable, uncorrectable,
    /// pending, failed).
    pub remapped: Option<(u32, u32, bool, bool)>,
}

/// ECC errors, retired pages and row remapping.
pub fn judge_ecc(name: &str, e: &EccState) -> Check {
    let mut parts = Vec::new();
    let mut status = Status::Pass;
    let mut hint = "";
    match e.uncorrected_volatile {
        Some(0) => parts.push("no uncorrected ECC errors".to_string()),
        Some(n) => {
            parts.push(format!("{n} uncorrected ECC errors"));
            status = Status::Fail;
            hint = "drain the node and reset the GPU (nvidia-smi -r); repeated errors mean RMA";
        }
        None => parts.push("ECC off or unsupported".to_string()),
    }
    if let Some(n) = e.retired_double_bit.filter(|&n| n > 0) {
        parts.push(format!("{n} pages retired (double-bit)"));
        status = status.max(Status::Warn);
        hint = "retired pages take effect after a reset; many of them mean RMA";
    }
    if let Some((corr, unc, pending, failed)) = e.remapped {
        parts.push(format!(
            "remapped rows {corr} correctable, {unc} uncorrectable"
        ));
        if failed {
            parts.push("row remapping FAILED".into());
            status = Status::Fail;
            hint = "row remapping failed: the GPU needs service (RMA)";
        } else if pending {
            parts.push("remapping pending".into());
            status = status.max(Status::Warn);
            hint = "a row remap is pending: reset the GPU (nvidia-smi -r) to apply it";
        }
    }
    Check::new(name, status, parts.join(", "), hint)
}

/// Clock throttle reasons that mean the GPU is held back now.
pub fn judge_throttle(
    name: &str,
    sm_mhz: Option<u32>,
    max_mhz: Option<u32>,
    reasons: &[&str],
) -> Check {
    const BAD: [&str; 4] = [
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    ];
    let clocks = match (sm_mhz, max_mhz) {
        (Some(c), Some(m)) => format!("SM clock {c}/{m} MHz"),
        _ => "SM clock unknown".into(),
    };
    let bad: Vec<&str> = reasons
        .iter()
        .copied()
        .filter(|r| BAD.contains(r))
        .collect();
    let shown = if reasons.is_empty() {
        "no throttling".to_string()
    } else {
        format!("throttle reasons: {}", reasons.join(", "))
    };
    if bad.is_empty() {
        Check::new(name, Status::Pass, format!("{clocks}, {shown}"), "")
    } else {
        Check::new(
            name,
            Status::Warn,
            format!("{clocks}, {shown}"),
            "thermal or power slowdown: check cooling, fans and power supply (nvidia-smi -q -d PERFORMANCE)",
        )
    }
}

/// NVLink: `supported` links that answer, `active` of them up.
pub fn judge_nvlink(name: &str, supported: u32, active: u32) -> Check {
    match (supported, active) {
        (0, _) => Check::new(name, Status::Skip, "no NVLink on this GPU", ""),
        (s, a) if a == s => Check::new(name, Status::Pass, format!("{a} NVLink links active"), ""),
        (s, a) => Check::new(
            name,
            Status::Warn,
            format!("{a} of {s} NVLink links active"),
            "inactive NVLink links cut bandwidth: check nvidia-smi nvlink -s and the fabric manager (NVSwitch systems)",
        ),
    }
}

/// PCIe link against its maximum. A lower generation is normal while a
/// GPU idles (it saves power), so only a narrower link warns.
pub fn judge_pcie(name: &str, gen: Option<(u32, u32)>, width: Option<(u32, u32)>) -> Check {
    let (Some((g, gmax)), Some((w, wmax))) = (gen, width) else {
        return Check::new(name, Status::Skip, "PCIe link not reported", "");
    };
    let text = format!("PCIe gen {g}/{gmax}, width x{w}/x{wmax}");
    if w < wmax {
        Check::new(
            name,
            Status::Warn,
            text,
            "the PCIe link trained narrower than it can: reseat the card or check the riser/slot",
        )
    } else if g < gmax {
        Check::new(
            name,
            Status::Pass,
            text + " (idle GPUs lower their generation; re-check under load)",
            "",
        )
    } else {
        Check::new(name, Status::Pass, text, "")
    }
}

fn throttle_names(r: ThrottleReasons) -> Vec<&'static str> {
    let table = [
        (ThrottleReasons::GPU_IDLE, "gpu_idle"),
        (
            ThrottleReasons::APPLICATIONS_CLOCKS_SETTING,
            "applications_clocks_setting",
        ),
        (ThrottleReasons::SW_POWER_CAP, "sw_power_cap"),
        (ThrottleReasons::HW_SLOWDOWN, "hw_slowdown"),
        (ThrottleReasons::SYNC_BOOST, "sync_boost"),
        (ThrottleReasons::SW_THERMAL_SLOWDOWN, "sw_thermal_slowdown"),
        (ThrottleReasons::HW_THERMAL_SLOWDOWN, "hw_thermal_slowdown"),
        (
            ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN,
            "hw_power_brake_slowdown",
        ),
        (
            ThrottleReasons::DISPLAY_CLOCK_SETTING,
            "display_clock_setting",
        ),
    ];
    table
        .iter()
        .filter(|(bit, _)| r.contains(*bit))
        .map(|(_, n)| *n)
        .collect()
}

/// Remapped rows through the C call nvml-wrapper does not wrap.
fn remapped_rows(d: &Device) -> Option<(u32, u32, bool, bool)> {
    type F =
        unsafe extern "C" fn(*mut std::ffi::c_void, *mut u32, *mut u32, *mut u32, *mut u32) -> u32;
    // SAFETY: NVML is initialised (we hold a Device); the call writes four
    // unsigned ints and returns NVML_SUCCESS (0) or an error code.
    unsafe {
        let lib = libloading::Library::new("libnvidia-ml.so.1").ok()?;
        let f = lib.get::<F>(b"nvmlDeviceGetRemappedRows\0").ok()?;
        let (mut c, mut u, mut p, mut fl) = (0u32, 0u32, 0u32, 0u32);
        (f(
            d.handle() as *mut std::ffi::c_void,
            &mut c,
            &mut u,
            &mut p,
            &mut fl,
        ) == 0)
            .then_some((c, u, p != 0, fl != 0))
    }
}

fn device_checks(i: u32, d: &Device) -> Vec<Check> {
    let name = d.name().unwrap_or_else(|_| "unknown GPU".into());
    let mem_gib = d
        .memory_info()
        .map(|m| format!("{:.0} GiB", m.total as f64 / (1u64 << 30) as f64))
        .unwrap_or_else(|_| "memory unknown".into());
    let bus = d
        .pci_info()
        .map(|p| format!(", bus {}", p.bus_id))
        .unwrap_or_default();
    let ecc = EccState {
        uncorrected_volatile: d
            .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
            .ok(),
        retired_double_bit: d
            .retired_pages(RetirementCause::DoubleBitEccError)
            .ok()
            .map(|v| v.len()),
        remapped: remapped_rows(d),
    };
    let reasons = d
        .current_throttle_reasons()
        .map(throttle_names)
        .unwrap_or_default();
    let (mut supported, mut active) = (0, 0);
    for link in 0..18 {
        if let Ok(up) = d.link_wrapper_for(link).is_active() {
            supported += 1;
            active += up as u32;
        }
    }
    let both = |a: Result<u32, _>, b: Result<u32, _>| a.ok().zip(b.ok());
    vec![
        Check::new(
            &format!("gpu{i}"),
            Status::Pass,
            format!("{name}, {mem_gib}{bus}"),
            "",
        ),
        judge_ecc(&format!("gpu{i} memory"), &ecc),
        judge_throttle(
            &format!("gpu{i} clocks"),
            d.clock_info(Clock::SM).ok(),
            d.max_clock_info(Clock::SM).ok(),
            &reasons,
        ),
        judge_nvlink(&format!("gpu{i} nvlink"), supported, active),
        judge_pcie(
            &format!("gpu{i} pcie"),
            both(d.current_pcie_link_gen(), d.max_pcie_link_gen()),
            both(d.current_pcie_link_width(), d.max_pcie_link_width()),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_versions_and_absence() {
        let c = judge_cuda_driver(Ok(Some(13000)));
        assert_eq!(c.status, Status::Pass);
        assert!(c.message.contains("CUDA 13.0"), "{}", c.message);
        assert!(judge_cuda_driver(Ok(Some(12080)))
            .message
            .contains("CUDA 12.8"));
        assert_eq!(judge_cuda_driver(Err("nope".into())).status, Status::Skip);
        assert_eq!(judge_cuda_driver(Ok(None)).status, Status::Fail);
    }

    #[test]
    fn ecc_and_remapping() {
        let clean = EccState {
            uncorrected_volatile: Some(0),
            retired_double_bit: None,
            remapped: Some((0, 0, false, false)),
        };
        assert_eq!(judge_ecc("g", &clean).status, Status::Pass);
        let pending = EccState {
            remapped: Some((1, 0, true, false)),
            ..clean.clone()
        };
        assert_eq!(judge_ecc("g", &pending).status, Status::Warn);
        let bad = EccState {
            uncorrected_volatile: Some(3),
            ..clean.clone()
        };
        let c = judge_ecc("g", &bad);
        assert_eq!(c.status, Status::Fail);
        assert!(c.message.contains("3 uncorrected"));
        let failed = EccState {
            remapped: Some((0, 1, false, true)),
            ..clean
        };
        assert_eq!(judge_ecc("g", &failed).status, Status::Fail);
    }

    #[test]
    fn throttling_nvlink_and_pcie() {
        assert_eq!(
            judge_throttle("g", Some(1980), Some(1980), &["gpu_idle"]).status,
            Status::Pass
        );
        assert_eq!(
            judge_throttle("g", Some(900), Some(1980), &["hw_thermal_slowdown"]).status,
            Status::Warn
        );
        assert_eq!(judge_nvlink("g", 18, 18).message, "18 NVLink links active");
        assert_eq!(judge_nvlink("g", 18, 12).status, Status::Warn);
        assert_eq!(judge_nvlink("g", 0, 0).status, Status::Skip);
        assert_eq!(
            judge_pcie("g", Some((1, 5)), Some((16, 16))).status,
            Status::Pass
        );
        assert_eq!(
            judge_pcie("g", Some((5, 5)), Some((8, 16))).status,
            Status::Warn
        );
        assert_eq!(judge_pcie("g", None, Some((8, 16))).status, Status::Skip);
    }
}
