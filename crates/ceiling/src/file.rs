//! Topology files: a TOML description of a machine that is not here (the
//! same fields as a record's `topology`). Read with a size bound and
//! checked, so a mistake is one line naming the problem and the fix.

use crate::fabric::{self, HostFabric};
use collbench_core::bounds::{positive_at_most, MAX_GBPS, MAX_RANKS};
use collbench_core::Topology;
use std::io::Read;
use std::path::Path;

/// A topology file is a few dozen lines; anything far larger is a wrong
/// path (a log, a binary), refused before it is read whole.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// Why a topology file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read topology file {path}: {source} (check the path)")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("topology file {path} is over {MAX_FILE_BYTES} bytes: give a TOML topology description (see topologies/)")]
    TooBig { path: String },
    #[error("topology file {path} is not valid: {message} (see topologies/*.toml for the fields)")]
    Parse { path: String, message: String },
    #[error("topology file {path}: {problem}")]
    Invalid { path: String, problem: String },
    #[error("no topology file or built-in topology named {name}: give a TOML file's path, or one of {builtins}")]
    Unknown { name: String, builtins: String },
}

/// Reads and checks the topology file at `path`.
pub fn load(path: &Path) -> Result<Topology, FileError> {
    load_machine(path).map(|(t, _)| t)
}

/// [`load`] with the file's `[pcie]` table ([`HostFabric`]).
pub fn load_machine(path: &Path) -> Result<(Topology, HostFabric), FileError> {
    let shown = path.display().to_string();
    let read_err = |source| FileError::Read {
        path: shown.clone(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(read_err)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(FileError::TooBig { path: shown });
    }
    parse_machine_named(&text, &shown)
}

/// [`parse`], its errors naming `name` (a file's path, a built-in's name).
pub fn parse_named(text: &str, name: &str) -> Result<Topology, FileError> {
    parse_machine_named(text, name).map(|(t, _)| t)
}

/// [`parse_named`] with the text's `[pcie]` table ([`HostFabric`]).
pub fn parse_machine_named(text: &str, name: &str) -> Result<(Topology, HostFabric), FileError> {
    parse_machine(text).map_err(|e| match e {
        FileError::Parse { message, .. } => FileError::Parse {
            path: name.to_string(),
            message,
        },
        FileError::Invalid { problem, .. } => FileError::Invalid {
            path: name.to_string(),
            problem,
        },
        other => other,
    })
}

/// Parses and checks topology TOML text.
pub fn parse(text: &str) -> Result<Topology, FileError> {
    parse_machine(text).map(|(t, _)| t)
}

/// One line naming the line of `text` (shifted by `offset` lines) where
/// toml found the mistake.
fn parse_error(e: toml::de::Error, text: &str, offset: usize) -> FileError {
    // toml's own rendering spans lines (a caret drawing): keep one line
    // that names the line.
    let line = e
        .span()
        .map(|s| {
            format!(
                "line {}: ",
                text[..s.start].matches('\n').count() + 1 + offset
            )
        })
        .unwrap_or_default();
    FileError::Parse {
        path: String::new(),
        message: format!("{line}{}", e.message().replace('\n', " ")),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PcieTable {
    pcie: HostFabric,
}

/// Parses and checks topology TOML text and its `[pcie]` table, if any.
pub fn parse_machine(text: &str) -> Result<(Topology, HostFabric), FileError> {
    let split = fabric::split(text);
    let topo: Topology =
        toml::from_str(&split.topology).map_err(|e| parse_error(e, &split.topology, 0))?;
    let fabric = match &split.pcie {
        Some((t, at)) => {
            let f = toml::from_str::<PcieTable>(t)
                .map_err(|e| parse_error(e, t, *at))?
                .pcie;
            f.check().map_err(|problem| FileError::Invalid {
                path: String::new(),
                problem,
            })?;
            f
        }
        None => HostFabric::default(),
    };
    check(&topo).map_err(|problem| FileError::Invalid {
        path: String::new(),
        problem,
    })?;
    Ok((topo, fabric))
}

/// The values no machine has: zero hosts, zero GPUs, counts past a
/// job's ranks (`hosts = 4294967296`), rates that are no number or none a
/// link has (`inf`, `1e308`). The bounds are [`collbench_core::bounds`]'.
pub fn check(t: &Topology) -> Result<(), String> {
    check_counts(t)?;
    check_rates(t)?;
    check_peer_links(t)
}

/// A GPU's links to its peers (`peer_links`): a count x count matrix, the
/// same both ways, none from a GPU to itself, and GPUs that meet in no
/// switch (a switch joins every pair at full rate, so the two contradict).
fn check_peer_links(t: &Topology) -> Result<(), String> {
    let Some(g) = t.gpu.as_ref().filter(|g| !g.peer_links.is_empty()) else {
        return Ok(());
    };
    let n = g.count as usize;
    if g.peer_links.len() != n || g.peer_links.iter().any(|r| r.len() != n) {
        return Err(format!(
            "[gpu] peer_links must be {n} rows of {n} link counts ([gpu] count = {n}): one row per GPU, one column per peer"
        ));
    }
    if g.nvswitch == Some(true) {
        return Err("[gpu] peer_links describes GPUs joined without a switch, but nvswitch = true: set nvswitch = false or drop peer_links".into());
    }
    for i in 0..n {
        if g.peer_links[i][i] != 0 {
            return Err(format!(
                "[gpu] peer_links row {i} gives GPU {i} links to itself: set its diagonal to 0"
            ));
        }
        for j in 0..i {
            if g.peer_links[i][j] != g.peer_links[j][i] {
                return Err(format!(
                    "[gpu] peer_links gives GPU {i} {} links to GPU {j} but GPU {j} {} back: a link joins both, so make the matrix symmetric",
                    g.peer_links[i][j], g.peer_links[j][i]
                ));
            }
        }
    }
    Ok(())
}

/// Every count from 1 to a job's ranks, and hosts times ranks too.
fn check_counts(t: &Topology) -> Result<(), String> {
    let too_many = |field: &str, n: u64| {
        Err(format!(
            "{field} = {n} is more than collbench's limit of {MAX_RANKS} ranks in a job: give the machine's real count"
        ))
    };
    if t.hosts == 0 {
        return Err("hosts = 0: set hosts to 1 or more".into());
    }
    if t.ranks_per_host == Some(0) {
        return Err("ranks_per_host = 0: set it to 1 or more, or leave it out".into());
    }
    if t.concurrent_comms == Some(0) {
        return Err("concurrent_comms = 0: set it to 1 or more, or leave it out".into());
    }
    if t.gpu.as_ref().is_some_and(|g| g.count == 0) {
        return Err("[gpu] count = 0: set the GPUs per host, or drop [gpu]".into());
    }
    if t.nics.iter().any(|n| n.count == 0) {
        return Err("[[nics]] needs rate_gbit above 0 and count of 1 or more".into());
    }
    let counts = [
        ("hosts", Some(t.hosts)),
        ("ranks_per_host", t.ranks_per_host),
        ("concurrent_comms", t.concurrent_comms),
        ("nvlink_domain_hosts", t.nvlink_domain_hosts),
        ("[gpu] count", t.gpu.as_ref().map(|g| g.count)),
        ("[[nics]] count", t.nics.iter().map(|n| n.count).max()),
    ];
    for (field, n) in counts {
        if let Some(n) = n.filter(|&n| n > MAX_RANKS) {
            return too_many(field, n);
        }
    }
    let ranks = t.hosts * t.ranks_per_host().unwrap_or(1);
    if ranks > MAX_RANKS {
        return too_many("hosts x ranks per host", ranks);
    }
    Ok(())
}

/// Every rate a number above 0 that a link can have.
fn check_rates(t: &Topology) -> Result<(), String> {
    let out_of_range = |field: &str, unit: &str, max: f64| {
        Err(format!(
            "{field} must be above 0 and at most {max} ({unit}): give the link's real rate"
        ))
    };
    if let Some(r) = t.gpu.as_ref().and_then(|g| g.nvlink_link_gbps) {
        if !positive_at_most(r, MAX_GBPS) {
            return out_of_range(
                "[gpu] nvlink_link_gbps",
                "GB/s per link and direction",
                MAX_GBPS,
            );
        }
    }
    if t.nics
        .iter()
        .any(|n| !positive_at_most(n.rate_gbit, MAX_GBPS * 8.0))
    {
        return out_of_range("[[nics]] rate_gbit", "Gbit/s per NIC", MAX_GBPS * 8.0);
    }
    if let Some(r) = t.cpu.as_ref().and_then(|c| c.mem_copy_gbps) {
        if !positive_at_most(r, MAX_GBPS) {
            return out_of_range("[cpu] mem_copy_gbps", "GB/s", MAX_GBPS);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_minimal_machine() {
        let t =
            parse("hosts = 2\n[gpu]\ncount = 8\n[[nics]]\nrate_gbit = 400\ncount = 8\n").unwrap();
        assert_eq!(t.host_net_gbps(), Some(400.0));
    }

    #[test]
    fn a_misspelt_field_is_named() {
        let e = parse("hosts = 1\nhostz = 2\n").unwrap_err().to_string();
        assert!(e.contains("hostz") && e.contains("line 2"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn a_pcie_table_is_read_apart_and_its_mistakes_name_their_line() {
        let text = "hosts = 1\n[gpu]\ncount = 8\n[pcie]\np2p = false\nsockets = 2\n";
        let (t, f) = parse_machine(text).unwrap();
        assert_eq!(t.gpu.map(|g| g.count), Some(8));
        assert_eq!((f.p2p, f.sockets), (Some(false), Some(2)));
        // The topology alone reads the same file.
        assert!(parse(text).is_ok());
        let e = parse_machine("hosts = 1\n[pcie]\np2p = false\nsokets = 2\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sokets") && e.contains("line 4"), "{e}");
        let e = parse_machine("hosts = 1\n[pcie]\nsockets = 0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 or more"), "{e}");
    }

    #[test]
    fn zero_hosts_says_the_fix() {
        let e = parse("hosts = 0\n").unwrap_err().to_string();
        assert!(e.contains("set hosts to 1 or more"), "{e}");
    }

    #[test]
    fn inf_huge_rates_and_counts_past_a_job_are_refused() {
        for (text, says) in [
            (
                "hosts = 1\n[[nics]]\nrate_gbit = inf\n",
                "rate_gbit must be above 0 and at most 800000",
            ),
            (
                "hosts = 1\n[[nics]]\nrate_gbit = 1e308\n",
                "rate_gbit must be",
            ),
            (
                "hosts = 1\n[[nics]]\nrate_gbit = nan\n",
                "rate_gbit must be",
            ),
            (
                "hosts = 1\n[gpu]\ncount = 8\nnvlink_link_gbps = inf\n",
                "nvlink_link_gbps must be",
            ),
            (
                "hosts = 1\n[cpu]\nmem_copy_gbps = inf\n",
                "mem_copy_gbps must be",
            ),
            ("hosts = 4294967296\n", "hosts = 4294967296 is more than"),
            (
                "hosts = 1\nranks_per_host = 9223372036854775807\n",
                "ranks_per_host = 9223372036854775807 is more than",
            ),
            (
                "hosts = 1\n[gpu]\ncount = 4294967296\n",
                "[gpu] count = 4294967296",
            ),
            (
                "hosts = 1024\n[gpu]\ncount = 2048\n",
                "hosts x ranks per host = 2097152",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        parse("hosts = 1024\n[gpu]\ncount = 1024\n").unwrap();
    }

    #[test]
    fn peer_link_matrices_of_the_wrong_shape_or_asymmetric_are_refused() {
        let gpu = "hosts = 1\n[gpu]\ncount = 2\n";
        for (rest, says) in [
            ("peer_links = [[0, 1]]\n", "must be 2 rows of 2 link counts"),
            ("peer_links = [[0, 1], [1]]\n", "must be 2 rows of 2"),
            (
                "peer_links = [[1, 1], [1, 0]]\n",
                "row 0 gives GPU 0 links to itself",
            ),
            (
                "peer_links = [[0, 2], [1, 0]]\n",
                "GPU 1 1 links to GPU 0 but GPU 0 2 back",
            ),
            (
                "nvswitch = true\npeer_links = [[0, 1], [1, 0]]\n",
                "set nvswitch = false or drop peer_links",
            ),
        ] {
            let e = parse(&format!("{gpu}{rest}")).unwrap_err().to_string();
            assert!(e.contains(says) && !e.contains('\n'), "{rest}: {e}");
        }
        let t = parse(&format!(
            "{gpu}link_kind = \"xgmi\"\npeer_links = [[0, 1], [1, 0]]\n"
        ))
        .unwrap();
        assert_eq!(t.gpu.unwrap().peer_links, vec![vec![0, 1], vec![1, 0]]);
    }

    #[test]
    fn an_oversized_file_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.toml");
        std::fs::write(&p, vec![b'#'; MAX_FILE_BYTES as usize + 10]).unwrap();
        assert!(matches!(load(&p), Err(FileError::TooBig { .. })));
    }
}
