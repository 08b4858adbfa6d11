//! `collbench gen mpirun`: an OpenMPI command line, one rank per slot (GPU).
//!
//! collbench reads its rank from OMPI_COMM_WORLD_* and needs no MPI library;
//! only rank 0's address is missing from what mpirun provides, so the line
//! passes `COLLBENCH_RENDEZVOUS=<first host>:<port>` (mpirun's default mapping
//! puts rank 0 on the first host of -H).

use crate::error::Result;

use crate::quote::sh_join;
use crate::{validate, CommonOptions};

/// `collbench gen mpirun` arguments.
#[derive(Debug, Clone)]
pub struct MpirunOptions {
    /// Hosts and their slots (GPUs), e.g. h1:8,h2:8.
    pub hosts: String,
    /// TCP port rank 0 listens on for the other ranks.
    pub port: u16,
    pub common: CommonOptions,
}

/// Renders the command line, one option group per line.
pub fn render(args: &MpirunOptions) -> Result<String> {
    validate::port("--port", args.port)?;
    let hosts = validate::hosts(&args.hosts)?;
    let env = validate::env_vars(&args.common.env)?;
    let np: u64 = hosts.iter().map(|(_, slots)| u64::from(*slots)).sum();
    let host_list = hosts
        .iter()
        .map(|(h, n)| format!("{h}:{n}"))
        .collect::<Vec<_>>()
        .join(",");

    let mut lines = vec![sh_join(&[
        "mpirun",
        "--allow-run-as-root",
        "-np",
        &np.to_string(),
        "-H",
        &host_list,
        // collbench binds its own GPU; OpenMPI's core binding would only
        // squeeze every rank's host threads onto one core.
        "--bind-to",
        "none",
    ])];
    // A rendezvous the user gives wins over the derived one.
    if !env.iter().any(|(k, _)| k == "COLLBENCH_RENDEZVOUS") {
        let rendezvous = format!("COLLBENCH_RENDEZVOUS={}:{}", hosts[0].0, args.port);
        lines.push(sh_join(&["-x", &rendezvous]));
    }
    for (k, v) in &env {
        lines.push(sh_join(&["-x", &format!("{k}={v}")]));
    }
    let mut command = vec![args.common.collbench.clone()];
    command.extend(args.common.collbench_args());
    lines.push(sh_join(&command));
    Ok(lines.join(" \\\n  ") + "\n")
}
