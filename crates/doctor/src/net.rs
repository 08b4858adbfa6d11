//! RDMA (InfiniBand/RoCE) ports and the NCCL variables that name network
//! devices: a typo in NCCL_IB_HCA or NCCL_SOCKET_IFNAME silently moves
//! traffic to a slower path or stops NCCL from starting.

use super::{Check, Status};
use std::path::Path;

/// One RDMA port as /sys/class/infiniband shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IbPort {
    pub device: String,
    pub port: u32,
    /// `ACTIVE`, `DOWN`, `INIT`, ... (the text after `4: `).
    pub state: String,
    /// `400 Gb/sec (4X NDR)`.
    pub rate: String,
    /// `InfiniBand` or `Ethernet` (RoCE).
    pub link_layer: String,
}

fn read_trim(p: &Path) -> String {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn sorted_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Every port under /sys/class/infiniband (none when absent).
pub fn read_ib_ports() -> Vec<IbPort> {
    read_ib_ports_in(Path::new("/sys/class/infiniband"))
}

/// Every port under `root` (a /sys/class/infiniband layout).
pub fn read_ib_ports_in(root: &Path) -> Vec<IbPort> {
    let mut out = Vec::new();
    for dev in sorted_entries(root) {
        let ports = root.join(&dev).join("ports");
        for p in sorted_entries(&ports) {
            let Ok(port) = p.parse::<u32>() else { continue };
            let dir = ports.join(&p);
            let state = read_trim(&dir.join("state"));
            out.push(IbPort {
                device: dev.clone(),
                port,
                // "4: ACTIVE" -> "ACTIVE"
                state: state
                    .split(':')
                    .next_back()
                    .unwrap_or("")
                    .trim()
                    .to_string(),
                rate: read_trim(&dir.join("rate")),
                link_layer: read_trim(&dir.join("link_layer")),
            });
        }
    }
    out
}

/// Network interface names under /sys/class/net.
pub fn read_net_interfaces() -> Vec<String> {
    sorted_entries(Path::new("/sys/class/net"))
}

/// One line per RDMA port, or a SKIP line when there are none.
pub fn ib_checks(ports: &[IbPort]) -> Vec<Check> {
    if ports.is_empty() {
        return vec![Check::new(
            "rdma",
            Status::Skip,
            "no InfiniBand/RoCE devices (/sys/class/infiniband is empty or absent)",
            "multi-node runs will use TCP sockets; on an RDMA cluster load the driver (mlx5_ib) and expose /dev/infiniband to containers",
        )];
    }
    ports
        .iter()
        .map(|p| {
            let kind = if p.link_layer == "Ethernet" { "RoCE" } else { "InfiniBand" };
            let text = format!("{} {}, {kind}", p.state, p.rate);
            let name = format!("rdma {}:{}", p.device, p.port);
            if p.state == "ACTIVE" {
                Check::new(&name, Status::Pass, text, "")
            } else {
                Check::new(
                    &name,
                    Status::Warn,
                    text,
                    "port not ACTIVE: check the cable and switch port (ibstat), or leave it out of NCCL_IB_HCA",
                )
            }
        })
        .collect()
}

/// A parsed NCCL device list (`NCCL_IB_HCA`, `NCCL_SOCKET_IFNAME`):
/// `^` excludes the listed devices, `=` matches names exactly (otherwise
/// each entry is a prefix), entries may carry `:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceList {
    pub exclude: bool,
    pub exact: bool,
    pub entries: Vec<(String, Option<u32>)>,
}

/// Parses NCCL's device-list syntax (`^=mlx5_0:1,mlx5_1`).
pub fn parse_device_list(value: &str) -> DeviceList {
    let mut s = value.trim();
    let exclude = s.starts_with('^');
    if exclude {
        s = &s[1..];
    }
    let exact = s.starts_with('=');
    if exact {
        s = &s[1..];
    }
    let entries = s
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| match e.split_once(':') {
            Some((name, port)) => (name.to_string(), port.parse().ok()),
            None => (e.to_string(), None),
        })
        .collect();
    DeviceList {
        exclude,
        exact,
        entries,
    }
}

impl DeviceList {
    fn matches(&self, entry: &(String, Option<u32>), name: &str, port: Option<u32>) -> bool {
        let name_ok = if self.exact {
            name == entry.0
        } else {
            name.starts_with(&entry.0)
        };
        name_ok && (entry.1.is_none() || port.is_none() || entry.1 == port)
    }

    /// Entries that match none of `available` (name, port).
    pub fn unmatched(&self, available: &[(String, Option<u32>)]) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| !available.iter().any(|(n, p)| self.matches(e, n, *p)))
            .map(|(n, p)| match p {
                Some(p) => format!("{n}:{p}"),
                None => n.clone(),
            })
            .collect()
    }

    /// Devices of `available` this list lets NCCL use.
    pub fn selected(&self, available: &[(String, Option<u32>)]) -> usize {
        available
            .iter()
            .filter(|(n, p)| self.entries.iter().any(|e| self.matches(e, n, *p)) != self.exclude)
            .count()
    }
}

/// Judges one variable's device list against what exists.
pub fn judge_device_list(
    var: &str,
    value: &str,
    available: &[(String, Option<u32>)],
    what: &str,
) -> Check {
    let list = parse_device_list(value);
    let missing = list.unmatched(available);
    let have: Vec<String> = available
        .iter()
        .map(|(n, p)| match p {
            Some(p) => format!("{n}:{p}"),
            None => n.clone(),
        })
        .collect();
    let have = if have.is_empty() {
        "none".to_string()
    } else {
        have.join(", ")
    };
    let selected = list.selected(available);
    let name = var.to_string();
    if selected == 0 {
        return Check::new(
            &name,
            Status::Fail,
            format!("{var}={value} selects no {what} (present: {have})"),
            format!("fix or unset {var}: NCCL would find no usable {what}"),
        );
    }
    if !missing.is_empty() && !list.exclude {
        return Check::new(
            &name,
            Status::Warn,
            format!("{var}={value} names {} that do not exist (present: {have})", missing.join(", ")),
            format!("remove the missing names from {var} (a typo there silently narrows what NCCL uses)"),
        );
    }
    Check::new(
        &name,
        Status::Pass,
        format!("{var}={value} selects {selected} {what}(s)"),
        "",
    )
}

/// Checks NCCL_IB_HCA and NCCL_SOCKET_IFNAME where set.
pub fn nccl_env_checks(
    env: &dyn Fn(&str) -> Option<String>,
    ib: &[IbPort],
    nets: &[String],
) -> Vec<Check> {
    let mut out = Vec::new();
    if let Some(v) = env("NCCL_IB_HCA").filter(|v| !v.trim().is_empty()) {
        let avail: Vec<(String, Option<u32>)> = ib
            .iter()
            .map(|p| (p.device.clone(), Some(p.port)))
            .collect();
        out.push(judge_device_list("NCCL_IB_HCA", &v, &avail, "RDMA device"));
    }
    if let Some(v) = env("NCCL_SOCKET_IFNAME").filter(|v| !v.trim().is_empty()) {
        let avail: Vec<(String, Option<u32>)> = nets.iter().map(|n| (n.clone(), None)).collect();
        out.push(judge_device_list(
            "NCCL_SOCKET_IFNAME",
            &v,
            &avail,
            "network interface",
        ));
    }
    if out.is_empty() {
        out.push(Check::new(
            "nccl env",
            Status::Pass,
            "NCCL_IB_HCA and NCCL_SOCKET_IFNAME not set (NCCL picks devices itself)",
            "",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ib(names: &[&str]) -> Vec<(String, Option<u32>)> {
        names.iter().map(|n| (n.to_string(), Some(1))).collect()
    }

    #[test]
    fn parses_prefixes_and_ports() {
        let l = parse_device_list("^=mlx5_0:1,mlx5_1");
        assert!(l.exclude && l.exact);
        assert_eq!(
            l.entries,
            vec![("mlx5_0".into(), Some(1)), ("mlx5_1".into(), None)]
        );
        let l = parse_device_list("eth0");
        assert!(!l.exclude && !l.exact);
    }

    #[test]
    fn prefix_exact_and_exclude_semantics() {
        let avail = ib(&["mlx5_0", "mlx5_1", "mlx5_10"]);
        // Prefix: mlx5_1 matches mlx5_1 and mlx5_10.
        assert_eq!(parse_device_list("mlx5_1").selected(&avail), 2);
        assert_eq!(parse_device_list("=mlx5_1").selected(&avail), 1);
        assert_eq!(parse_device_list("^mlx5_1").selected(&avail), 1);
        assert_eq!(
            parse_device_list("mlx5_0:2").unmatched(&avail),
            vec!["mlx5_0:2"]
        );
    }

    #[test]
    fn judges_missing_devices() {
        let avail = ib(&["mlx5_0", "mlx5_1"]);
        let ok = judge_device_list("NCCL_IB_HCA", "mlx5_0:1,mlx5_1:1", &avail, "RDMA device");
        assert_eq!(ok.status, Status::Pass);
        let typo = judge_device_list("NCCL_IB_HCA", "mlx5_0:1,mlx5_9:1", &avail, "RDMA device");
        assert_eq!(typo.status, Status::Warn);
        assert!(typo.message.contains("mlx5_9:1"), "{}", typo.message);
        let none = judge_device_list("NCCL_IB_HCA", "mlx5_1:1", &[], "RDMA device");
        assert_eq!(none.status, Status::Fail);
        let nets: Vec<(String, Option<u32>)> = vec![("lo".into(), None), ("eth0".into(), None)];
        assert_eq!(
            judge_device_list("NCCL_SOCKET_IFNAME", "^docker,lo", &nets, "i").status,
            Status::Pass
        );
        assert_eq!(
            judge_device_list("NCCL_SOCKET_IFNAME", "^eth,lo", &nets, "i").status,
            Status::Fail
        );
        assert_eq!(
            judge_device_list("NCCL_SOCKET_IFNAME", "=eth", &nets, "i").status,
            Status::Fail
        );
    }

    #[test]
    fn reads_a_sysfs_layout_and_judges_ports() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("mlx5_0/ports/1");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("state"), "4: ACTIVE\n").unwrap();
        std::fs::write(p.join("rate"), "400 Gb/sec (4X NDR)\n").unwrap();
        std::fs::write(p.join("link_layer"), "InfiniBand\n").unwrap();
        let q = dir.path().join("mlx5_1/ports/1");
        std::fs::create_dir_all(&q).unwrap();
        std::fs::write(q.join("state"), "1: DOWN\n").unwrap();
        std::fs::write(q.join("link_layer"), "Ethernet\n").unwrap();
        let ports = read_ib_ports_in(dir.path());
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[0].state, "ACTIVE");
        let checks = ib_checks(&ports);
        assert_eq!(checks[0].status, Status::Pass);
        assert!(checks[0].message.contains("400 Gb/sec"));
        assert_eq!(checks[1].status, Status::Warn);
        assert!(checks[1].message.contains("RoCE"));
        assert_eq!(ib_checks(&[])[0].status, Status::Skip);
    }

    #[test]
    fn env_checks_only_for_set_variables() {
        let none = |_: &str| None;
        assert_eq!(nccl_env_checks(&none, &[], &[])[0].name, "nccl env");
        let set = |k: &str| (k == "NCCL_SOCKET_IFNAME").then(|| "eth9".to_string());
        let c = nccl_env_checks(&set, &[], &["eth0".into()]);
        assert_eq!(c[0].status, Status::Fail);
    }
}
