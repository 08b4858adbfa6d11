//! Free TCP ports for a rendezvous that other processes are told about
//! before anyone listens (child jobs, tests, the scale harness).
//!
//! Asking the OS for port 0 gives a port of its ephemeral range, the very
//! range it draws the source ports of outgoing connections from: on a
//! busy host (a test suite, NCCL's own sockets) such a port is often some
//! connection's by the time the rendezvous binds it ("Address already in
//! use"). Ports are therefore picked outside that range
//! (`/proc/sys/net/ipv4/ip_local_port_range`), where only an explicit
//! bind can take them, and the OS's pick is the fallback.

use std::net::TcpListener;
use std::ops::RangeInclusive;

/// The lowest port picked: below it sit well-known services.
const LOWEST: u16 = 10_000;

/// The kernel's ephemeral range, Linux's default where it cannot be read.
fn ephemeral_range() -> RangeInclusive<u16> {
    let text =
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut it = text.split_whitespace().map(str::parse::<u16>);
    match (it.next(), it.next()) {
        (Some(Ok(lo)), Some(Ok(hi))) if lo <= hi => lo..=hi,
        _ => 32_768..=60_999,
    }
}

/// The ports at or above [`LOWEST`] outside `ephemeral`, in order.
fn outside(ephemeral: &RangeInclusive<u16>) -> Vec<u16> {
    (LOWEST..=u16::MAX)
        .filter(|p| !ephemeral.contains(p))
        .collect()
}

/// A start in `0..len` that differs between processes started at once
/// (pid and clock mixed), so that concurrent pickers rarely try the same
/// ports first.
fn spread(len: usize) -> usize {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    let mixed = (u64::from(std::process::id()) << 32 ^ nanos).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> 17) as usize % len.max(1)
}

/// `n` distinct ports free on `bind` a moment ago, outside the ephemeral
/// range where possible (all held at once, so they differ; released on
/// return). Falls back to the OS's picks where the space outside is
/// exhausted or cannot be bound.
pub fn free_ports(bind: &str, n: usize) -> std::io::Result<Vec<u16>> {
    let candidates = outside(&ephemeral_range());
    let start = spread(candidates.len());
    let mut held: Vec<TcpListener> = Vec::with_capacity(n);
    // A bounded walk: a host with thousands of listeners outside the
    // range still ends quickly, on the fallback.
    for &port in candidates
        .iter()
        .cycle()
        .skip(start)
        .take(candidates.len().min(4096))
    {
        if held.len() == n {
            break;
        }
        if let Ok(l) = TcpListener::bind((bind, port)) {
            held.push(l);
        }
    }
    while held.len() < n {
        held.push(TcpListener::bind((bind, 0))?);
    }
    held.iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

/// A TCP port a rendezvous can be told about: 1 to 65535. Port 0 asks the
/// OS for any free port, which no other rank can know: a job given it
/// waited out its timeout. Every reader of a port (`COLLBENCH_PORT`,
/// `MASTER_PORT`, `--rendezvous`, `--port`) makes one of these, and an
/// offset from one is checked, never wrapped (65535 + 1 was port 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Port(std::num::NonZeroU16);

/// Why a text is no [`Port`], for its one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// Not a whole number from 1 to 65535 (0, 99999, `x`, `-1`).
    #[error("{name}={value:?} is not a TCP port: give a port from 1 to 65535, or unset it")]
    Invalid {
        /// The variable or flag that held it.
        name: String,
        /// What it held.
        value: String,
    },
    /// The port plus an offset collbench adds passes 65535.
    #[error("{name}={port}: {why} listens on {name} + {offset}, past 65535: set {name} to {} or less", u16::MAX - offset)]
    NoRoom {
        /// The variable or flag that held it.
        name: String,
        /// Its port.
        port: u16,
        /// What is added.
        offset: u16,
        /// Who listens there and why, in words ("with X, rank 0").
        why: String,
    },
}

impl Port {
    /// The port `n`, when it is one (1 to 65535).
    pub fn new(n: u16) -> Option<Port> {
        std::num::NonZeroU16::new(n).map(Port)
    }

    /// Reads `value`, the text of `name` (a variable or flag).
    pub fn parse(name: &str, value: &str) -> Result<Port, PortError> {
        value
            .trim()
            .parse::<u16>()
            .ok()
            .and_then(Port::new)
            .ok_or_else(|| PortError::Invalid {
                name: name.to_string(),
                value: value.to_string(),
            })
    }

    /// The port as a number (never 0).
    pub fn get(self) -> u16 {
        self.0.get()
    }

    /// `self + offset`, or `None` past 65535.
    pub fn checked_add(self, offset: u16) -> Option<Port> {
        self.get().checked_add(offset).and_then(Port::new)
    }
}

impl std::fmt::Display for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod port_tests {
    use super::*;

    #[test]
    fn zero_past_65535_and_words_are_no_port() {
        for bad in ["0", "65536", "99999", "-1", "x", "", "18446744073709551615"] {
            let e = Port::parse("COLLBENCH_PORT", bad).unwrap_err().to_string();
            assert!(e.contains("from 1 to 65535"), "{bad}: {e}");
        }
        assert_eq!(Port::parse("P", " 29500 ").unwrap().get(), 29500);
        assert_eq!(Port::parse("P", "65535").unwrap().get(), 65535);
    }

    #[test]
    fn an_offset_past_65535_is_none_not_port_0() {
        let top = Port::new(65535).unwrap();
        assert_eq!(top.checked_add(1), None);
        assert_eq!(Port::new(65534).unwrap().checked_add(1), Port::new(65535));
        let e = PortError::NoRoom {
            name: "MASTER_PORT".into(),
            port: 65535,
            offset: 1,
            why: "rank 0".into(),
        };
        assert!(
            e.to_string().contains("set MASTER_PORT to 65534 or less"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_and_outside_the_ephemeral_range() {
        let ports = free_ports("127.0.0.1", 8).unwrap();
        let mut sorted = ports.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 8, "{ports:?}");
        let eph = ephemeral_range();
        assert!(
            ports.iter().all(|p| !eph.contains(p) && *p >= LOWEST),
            "{ports:?} {eph:?}"
        );
        // Each is bindable again once released.
        for p in ports {
            TcpListener::bind(("127.0.0.1", p)).unwrap();
        }
    }

    #[test]
    fn the_space_outside_skips_the_range_and_the_low_ports() {
        let out = outside(&(32_768..=60_999));
        assert_eq!(out.first(), Some(&LOWEST));
        assert!(out.contains(&32_767) && out.contains(&61_000) && out.contains(&65_535));
        assert!(!out.contains(&32_768) && !out.contains(&60_999));
        // A range covering everything leaves nothing: the fallback's case.
        assert!(outside(&(0..=u16::MAX)).is_empty());
        assert_eq!(spread(0), 0);
    }

    #[test]
    fn zero_ports_is_an_empty_list() {
        assert!(free_ports("127.0.0.1", 0).unwrap().is_empty());
    }
}
