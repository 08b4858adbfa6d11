//! Each fabric variant's own ceiling and verdict. The network variant's
//! ranks reach each other only through the NICs, so its machine is the
//! job's hosts with one rank each and the host's NICs shared by as many
//! communicators as it had ranks (no NVLink, no NVLS); the within-hosts
//! variant's machine is one host with its ranks and no network. A figure
//! is then judged by the rule of `ceiling_warn`: a large-size busbw under
//! [`FAR_BELOW`] of its ceiling warns, naming the part.

use super::Fabric;
use crate::ceiling_warn::{emulated_network, FAR_BELOW, LARGE_BYTES};
use crate::verdict::Status;
use collbench_ceiling::{ceiling, Query};
use collbench_core::size::format_size;
use collbench_core::{Collective, Topology};

/// The machine a variant runs on, as the ceiling model reads it.
pub fn variant_topology(topo: &Topology, variant: Fabric) -> Topology {
    let per_host = topo.ranks_per_host().unwrap_or(1);
    match variant {
        Fabric::AllPaths => topo.clone(),
        Fabric::Network => {
            let mut t = topo.clone();
            t.ranks_per_host = Some(1);
            t.concurrent_comms = Some(topo.concurrent_comms.unwrap_or(1).max(1) * per_host);
            t.nvlink_domain_hosts = None;
            if let Some(g) = t.gpu.as_mut() {
                g.nvlink_links = Some(0);
                g.nvswitch = Some(false);
                g.nvls = Some(false);
            }
            t
        }
        Fabric::Intra => Topology {
            hosts: 1,
            nics: Vec::new(),
            nvlink_domain_hosts: None,
            ..topo.clone()
        },
    }
}

/// A variant's figure judged against its ceiling.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub ceiling_gbps: Option<f64>,
    pub bottleneck: Option<String>,
    pub status: Status,
    pub note: String,
}

/// Judges `busbw` of `op` at `size` measured by `variant` against the
/// ceiling of its machine on `topo`. Wrong elements fail whatever the
/// speed. `judged` false (the CPU backend: a shared host's memory is no
/// part to repair) shows the ceiling without warning.
pub fn judge_variant(
    variant: Fabric,
    (op, size): (Collective, u64),
    (busbw, wrong): (f64, u64),
    topo: Option<&Topology>,
    judged: bool,
) -> Judged {
    let mut out = Judged {
        ceiling_gbps: None,
        bottleneck: None,
        status: Status::Info,
        note: format!("busbw {busbw:.2} GB/s"),
    };
    if wrong > 0 {
        out.status = Status::Fail;
        out.note = format!("{wrong} wrong elements: results are not correct");
        return out;
    }
    let Some(topo) = topo else {
        out.note += "; no ceiling: the hardware is unknown";
        return out;
    };
    let q = Query {
        op,
        bytes: size,
        in_place: false,
        algorithm: None,
    };
    let machine = variant_topology(topo, variant);
    let c = match ceiling(&machine, &q) {
        Ok(c) => c,
        Err(missing) => {
            out.note += &format!("; no ceiling: {missing}");
            return out;
        }
    };
    out.ceiling_gbps = Some(c.busbw_gbps);
    out.bottleneck = Some(c.bottleneck.label().to_string());
    let words = format!(
        "busbw {busbw:.2} GB/s is {:.0}% of its {:.2} GB/s ceiling set by {} ({})",
        c.percent_of(busbw),
        c.busbw_gbps,
        c.bottleneck.label(),
        c.algorithm.label()
    );
    out.note = if !judged {
        format!("{words}; the cpu backend is not judged against it (a shared host's memory is no part to repair)")
    } else if size < LARGE_BYTES {
        format!(
            "{words}; not judged below {}, where latency sets the pace",
            format_size(LARGE_BYTES)
        )
    } else if emulated_network(&machine, c.bottleneck) {
        format!("{words}; not judged: hosts emulated over loopback")
    } else if busbw < FAR_BELOW * c.busbw_gbps {
        out.status = Status::Warn;
        format!(
            "{words}: under {:.0}%, so {} is suspect",
            FAR_BELOW * 100.0,
            c.bottleneck.label()
        )
    } else {
        words
    };
    out
}
