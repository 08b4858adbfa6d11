//! collbench-doctor: `collbench doctor`, quick local checks of what
//! collective benchmarks depend on (CUDA driver, GPUs through NVML, NCCL,
//! InfiniBand ports, NCCL_* variables, memlock, /dev/shm, the control-plane
//! port), each PASS/WARN/FAIL/SKIP with a one-line hint.
//!
//! Every check reads the machine through a thin probe and judges it with
//! a pure function over what it read (text of /proc files, variable
//! values, device lists), so the judging is unit-tested on any machine.
//! Nothing here may block: the whole run must finish in a few seconds.
//!
//! Modules, one job each: [`gpu`] (driver, NVML, per-GPU health),
//! [`nccl`] (the library collbench would load), [`net`] (InfiniBand and
//! NCCL network variables), [`limits`] (memlock, /dev/shm, port),
//! [`topology`] (what bounds busbw here: GPUs, NICs, cores, memory),
//! [`why`] (what here can hold a row under its ceiling),
//! [`error`] (how it fails: [`DoctorError`]).
//!
//! Not for: anything that needs other processes or runs collectives
//! (`collbench preflight` and `collbench check` do that). It is its own
//! crate so that only it carries NVML, libloading and the NCCL loader:
//! collbench-check stays free of them.

pub mod error;
pub mod gpu;
pub mod limits;
pub mod nccl;
pub mod net;
pub mod peers;
pub mod topology;
pub mod why;

pub use error::DoctorError;

use serde::Serialize;

/// What `doctor` prints on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DoctorFormat {
    /// One line per check.
    Text,
    /// The checks as a JSON array.
    Json,
}

/// Runs the local checks; returns them rendered in `format` for stdout,
/// and the exit code (0 when every check passes or is skipped, 1 warn, 2
/// fail).
pub fn doctor_main(format: DoctorFormat) -> Result<(String, i32), DoctorError> {
    let checks = run_all();
    let text = if format == DoctorFormat::Json {
        serde_json::to_string_pretty(&checks)? + "\n"
    } else {
        render(&checks)
    };
    Ok((text, exit_code(&checks)))
}

/// Outcome of one check, ordered from best to worst (SKIP is neutral).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Skip,
    Pass,
    Warn,
    Fail,
}

impl Status {
    /// `PASS`, `WARN`, `FAIL`, `SKIP`.
    pub fn label(self) -> &'static str {
        match self {
            Status::Skip => "SKIP",
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// Short name (`cuda driver`, `gpu 0`, `memlock`).
    pub name: String,
    pub status: Status,
    /// What was found, in one line.
    pub message: String,
    /// What to do about it, in one line (empty when nothing).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hint: String,
}

impl Check {
    /// A check result.
    pub fn new(
        name: &str,
        status: Status,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Check {
        Check {
            name: name.to_string(),
            status,
            message: message.into(),
            hint: hint.into(),
        }
    }
}

/// Runs every check, in the order a user reads them.
pub fn run_all() -> Vec<Check> {
    let mut out = Vec::new();
    let driver = gpu::cuda_driver();
    out.push(driver.clone());
    let gpus = gpu::nvml_checks();
    let have_gpus = gpus
        .iter()
        .any(|c| c.name.starts_with("gpu ") && c.status != Status::Skip);
    out.extend(gpus);
    out.push(nccl::nccl_check(have_gpus));
    let ib = net::read_ib_ports();
    out.extend(net::ib_checks(&ib));
    let nets = net::read_net_interfaces();
    let env = |k: &str| std::env::var(k).ok();
    out.extend(net::nccl_env_checks(&env, &ib, &nets));
    out.push(limits::memlock_check(!ib.is_empty()));
    out.push(limits::shm_check());
    out.push(limits::port_check(&env));
    // What bounds busbw here (docs/ceiling.md), after the health checks.
    let mut topo = topology::local_topology();
    if let Some(cpu) = topo.cpu.as_mut() {
        cpu.mem_copy_gbps =
            collbench_ceiling::probe::mem_copy_gbps(collbench_ceiling::probe::MAX_REGION_BYTES);
    }
    out.extend(topology::topology_checks(&topo));
    let modules = why::read_modules(std::path::Path::new("/"));
    out.extend(why::why_checks(&topo, modules.as_deref()));
    out
}

/// The worst status, as an exit code: 0 when all pass or skip, 1 warn,
/// 2 fail.
pub fn exit_code(checks: &[Check]) -> i32 {
    match checks.iter().map(|c| c.status).max() {
        Some(Status::Fail) => 2,
        Some(Status::Warn) => 1,
        _ => 0,
    }
}

/// The checks as aligned text, hints indented below non-passing lines.
pub fn render(checks: &[Check]) -> String {
    let w = checks.iter().map(|c| c.name.len()).max().unwrap_or(8);
    let mut out = String::new();
    for c in checks {
        out += &format!("{}  {:<w$}  {}\n", c.status.label(), c.name, c.message);
        if !c.hint.is_empty() && c.status != Status::Pass {
            out += &format!("      {:<w$}  hint: {}\n", "", c.hint);
        }
    }
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    out += &format!(
        "collbench doctor: {} pass, {} warn, {} fail, {} skipped{}\n",
        count(Status::Pass),
        count(Status::Warn),
        count(Status::Fail),
        count(Status::Skip),
        if checks
            .iter()
            .any(|c| c.name == "gpus" && c.status == Status::Skip)
        {
            " (no NVIDIA GPU here: GPU checks skipped)"
        } else {
            ""
        }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_is_the_worst_and_skip_is_neutral() {
        let c = |s| Check::new("x", s, "m", "h");
        assert_eq!(exit_code(&[c(Status::Skip), c(Status::Pass)]), 0);
        assert_eq!(exit_code(&[c(Status::Warn), c(Status::Pass)]), 1);
        assert_eq!(exit_code(&[c(Status::Warn), c(Status::Fail)]), 2);
    }

    #[test]
    fn render_puts_hints_under_problems_only() {
        let text = render(&[
            Check::new("a", Status::Pass, "fine", "never shown"),
            Check::new("gpus", Status::Skip, "no NVML", "install the driver"),
        ]);
        assert!(!text.contains("never shown"));
        assert!(text.contains("hint: install the driver"));
        assert!(text.contains("no NVIDIA GPU here"));
    }
}
