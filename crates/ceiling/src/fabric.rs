//! How the GPUs of a host without NVLink reach each other: peer-to-peer
//! through a PCIe switch or the CPU's root complex (and the link between
//! the sockets), or, where the GPUs cannot do peer-to-peer (NVML's P2P
//! status "not supported", GeForce cards), NCCL's SHM transport through
//! host memory. A topology file gives it in a `[pcie]` table:
//!
//! ```toml
//! [pcie]
//! p2p = false              # NVML P2P status between the GPUs
//! sockets = 2              # CPU sockets the GPUs hang off
//! socket_link_gbps = 124.8 # UPI / xGMI between them, GB/s per direction
//! gpus_per_switch = 4      # GPUs behind one PCIe switch (absent: root ports)
//! uplink_generation = 5    # the switch's link to the CPU
//! uplink_width = 16
//! ```
//!
//! Host memory's rate is the topology's `[cpu] mem_copy_gbps`. Every field
//! may be left out: an unknown part bounds nothing. A record's topology
//! does not carry this table yet (it is `collbench-core`'s type), so only
//! `expect` and the published figures use it.

use serde::Deserialize;

/// The PCIe side of one host (see the module comment).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostFabric {
    /// Whether the GPUs reach each other peer-to-peer; `false`: NCCL's
    /// SHM transport, every byte written to host memory and read back.
    #[serde(default)]
    pub p2p: Option<bool>,
    /// CPU sockets the GPUs are spread over, evenly.
    #[serde(default)]
    pub sockets: Option<u64>,
    /// The link between two sockets (UPI, xGMI), GB/s per direction, all
    /// its lanes together.
    #[serde(default)]
    pub socket_link_gbps: Option<f64>,
    /// GPUs behind one PCIe switch; absent or 1: each GPU on a root port.
    #[serde(default)]
    pub gpus_per_switch: Option<u64>,
    /// PCIe generation of a switch's link to the CPU.
    #[serde(default)]
    pub uplink_generation: Option<u32>,
    /// Lanes of a switch's link to the CPU.
    #[serde(default)]
    pub uplink_width: Option<u32>,
}

impl HostFabric {
    /// The values no machine has, as one line with the fix.
    pub fn check(&self) -> Result<(), String> {
        if self.sockets == Some(0) || self.gpus_per_switch == Some(0) {
            return Err("[pcie] sockets and gpus_per_switch must be 1 or more".into());
        }
        if self
            .socket_link_gbps
            .is_some_and(|r| r.is_nan() || r <= 0.0)
        {
            return Err("[pcie] socket_link_gbps must be above 0 (GB/s per direction)".into());
        }
        Ok(())
    }
}

/// Where a `[pcie]` table sits in a topology file's text.
pub(crate) struct Split {
    /// The text with the table's lines blanked (line numbers kept), for
    /// the topology itself.
    pub topology: String,
    /// The table's own text (header included) and its first line's index.
    pub pcie: Option<(String, usize)>,
}

/// Takes the `[pcie]` table (its header line to the next table's) out of
/// `text`.
pub(crate) fn split(text: &str) -> Split {
    let lines: Vec<&str> = text.lines().collect();
    let header = |l: &str| l.split('#').next().unwrap_or("").trim().to_string();
    let Some(start) = lines.iter().position(|l| header(l) == "[pcie]") else {
        return Split {
            topology: text.to_string(),
            pcie: None,
        };
    };
    let end = (start + 1..lines.len())
        .find(|&i| header(lines[i]).starts_with('['))
        .unwrap_or(lines.len());
    let mut topology = String::with_capacity(text.len());
    for (i, l) in lines.iter().enumerate() {
        if !(start..end).contains(&i) {
            topology.push_str(l);
        }
        topology.push('\n');
    }
    Split {
        topology,
        pcie: Some((lines[start..end].join("\n"), start)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_taken_out_and_line_numbers_kept() {
        let text = "hosts = 1\n[pcie] # fabric\np2p = false\nsockets = 2\n[gpu]\ncount = 8\n";
        let s = split(text);
        assert_eq!(s.topology.lines().count(), 6);
        assert_eq!(s.topology.lines().nth(4), Some("[gpu]"));
        let (table, at) = s.pcie.unwrap();
        assert_eq!(at, 1);
        assert!(table.contains("sockets = 2") && !table.contains("[gpu]"));
    }

    #[test]
    fn no_table_is_none() {
        assert!(split("hosts = 1\n").pcie.is_none());
    }

    #[test]
    fn zero_sockets_is_refused() {
        let f = HostFabric {
            sockets: Some(0),
            ..HostFabric::default()
        };
        assert!(f.check().unwrap_err().contains("1 or more"));
    }
}
