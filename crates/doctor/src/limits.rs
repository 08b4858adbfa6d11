//! Process limits and local resources NCCL and the launch need: locked
//! memory (RDMA registers buffers), /dev/shm (NCCL's shared-memory
//! transport between processes), and the rendezvous port.

use super::{Check, Status};

/// A soft limit from /proc/self/limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Unlimited,
    Bytes(u64),
}

/// The soft "Max locked memory" limit from /proc/self/limits text.
pub fn parse_memlock(limits_text: &str) -> Option<Limit> {
    let line = limits_text
        .lines()
        .find(|l| l.starts_with("Max locked memory"))?;
    let soft = line["Max locked memory".len()..]
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        Some(Limit::Unlimited)
    } else {
        soft.parse().ok().map(Limit::Bytes)
    }
}

/// memlock matters for RDMA; without RDMA devices a limit is harmless.
pub fn judge_memlock(limit: Option<Limit>, have_rdma: bool) -> Check {
    let hint = "raise it: `ulimit -l unlimited` (limits.conf memlock), docker --ulimit memlock=-1, Slurm PropagateResourceLimits";
    match (limit, have_rdma) {
        (None, _) => Check::new("memlock", Status::Skip, "cannot read /proc/self/limits", ""),
        (Some(Limit::Unlimited), _) => Check::new("memlock", Status::Pass, "unlimited", ""),
        (Some(Limit::Bytes(b)), true) => Check::new(
            "memlock",
            Status::Warn,
            format!("{} KiB: too small for RDMA buffer registration", b / 1024),
            hint,
        ),
        (Some(Limit::Bytes(b)), false) => Check::new(
            "memlock",
            Status::Pass,
            format!("{} KiB (limited; matters only with RDMA devices)", b / 1024),
            hint,
        ),
    }
}

/// Reads and judges the memlock limit.
pub fn memlock_check(have_rdma: bool) -> Check {
    let text = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    judge_memlock(parse_memlock(&text), have_rdma)
}

/// NCCL wants room in /dev/shm for every process pair on a node; Docker's
/// default of 64 MiB is a classic cause of "unhandled system error".
pub const SHM_MIN_BYTES: u64 = 1 << 30;

/// Judges /dev/shm's total size (`None`: not mounted or unreadable).
pub fn judge_shm(total_bytes: Option<u64>) -> Check {
    match total_bytes {
        None => Check::new(
            "/dev/shm",
            Status::Warn,
            "not mounted or unreadable",
            "mount a tmpfs at /dev/shm (docker --ipc=host or --shm-size=16g)",
        ),
        Some(b) if b < SHM_MIN_BYTES => Check::new(
            "/dev/shm",
            Status::Warn,
            format!("{} MiB: small for NCCL's shared-memory transport", b >> 20),
            "enlarge it: docker --shm-size=16g or --ipc=host; Kubernetes: an emptyDir with medium: Memory at /dev/shm",
        ),
        Some(b) => Check::new(
            "/dev/shm",
            Status::Pass,
            format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
            "",
        ),
    }
}

/// Total size of the file system at /dev/shm.
pub fn shm_total_bytes() -> Option<u64> {
    let path = std::ffi::CString::new("/dev/shm").ok()?;
    // SAFETY: statvfs writes only into the struct we pass, which is
    // zero-initialised plain data.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid C string and `st` a live, writable struct.
    let rc = unsafe { libc::statvfs(path.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_blocks as u64 * st.f_frsize as u64)
}

/// Reads and judges /dev/shm.
pub fn shm_check() -> Check {
    judge_shm(shm_total_bytes())
}

/// The port rank 0 listens on: COLLBENCH_PORT, else the default.
pub fn rendezvous_port(env: &dyn Fn(&str) -> Option<String>) -> Result<u16, String> {
    match env("COLLBENCH_PORT") {
        None => Ok(collbench_launch::world::DEFAULT_PORT),
        // The one port reader: 0 (any port) is no rendezvous port.
        Some(v) => collbench_core::ports::Port::parse("COLLBENCH_PORT", &v)
            .map(collbench_core::ports::Port::get)
            .map_err(|e| e.to_string()),
    }
}

/// Whether the rendezvous port can be bound on this machine now.
pub fn port_check(env: &dyn Fn(&str) -> Option<String>) -> Check {
    let port = match rendezvous_port(env) {
        Ok(p) => p,
        Err(e) => {
            return Check::new(
                "rendezvous port",
                Status::Fail,
                e,
                "set COLLBENCH_PORT to a free port",
            )
        }
    };
    match std::net::TcpListener::bind(("127.0.0.1", port)) {
        Ok(_) => Check::new("rendezvous port", Status::Pass, format!("{port} is free"), ""),
        Err(e) => Check::new(
            "rendezvous port",
            Status::Warn,
            format!("{port} cannot be bound: {e}"),
            "another job (or a stuck collbench) holds it: set COLLBENCH_PORT or --rendezvous HOST:PORT to a free port",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: &str =
        "Limit                     Soft Limit           Hard Limit           Units     \n\
Max cpu time              unlimited            unlimited            seconds   \n\
Max locked memory         8388608              8388608              bytes     \n\
Max address space         unlimited            unlimited            bytes     \n";

    #[test]
    fn parses_memlock() {
        assert_eq!(parse_memlock(LIMITS), Some(Limit::Bytes(8388608)));
        let unl = LIMITS.replace(
            "8388608              8388608",
            "unlimited            unlimited",
        );
        assert_eq!(parse_memlock(&unl), Some(Limit::Unlimited));
        assert_eq!(parse_memlock("nothing"), None);
    }

    #[test]
    fn memlock_matters_with_rdma_only() {
        assert_eq!(
            judge_memlock(Some(Limit::Bytes(65536)), true).status,
            Status::Warn
        );
        assert_eq!(
            judge_memlock(Some(Limit::Bytes(65536)), false).status,
            Status::Pass
        );
        assert_eq!(
            judge_memlock(Some(Limit::Unlimited), true).status,
            Status::Pass
        );
    }

    #[test]
    fn shm_sizes() {
        assert_eq!(judge_shm(Some(64 << 20)).status, Status::Warn);
        assert!(judge_shm(Some(64 << 20)).message.contains("64 MiB"));
        assert_eq!(judge_shm(Some(16 << 30)).status, Status::Pass);
        assert_eq!(judge_shm(None).status, Status::Warn);
    }

    #[test]
    fn port_from_env_and_busy_port() {
        assert_eq!(rendezvous_port(&|_| None), Ok(29517));
        assert_eq!(rendezvous_port(&|_| Some("2000".into())), Ok(2000));
        assert!(rendezvous_port(&|_| Some("x".into())).is_err());
        assert!(rendezvous_port(&|_| Some("0".into())).is_err());
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = held.local_addr().unwrap().port().to_string();
        let c = port_check(&|_| Some(port.clone()));
        assert_eq!(c.status, Status::Warn, "{c:?}");
    }
}
