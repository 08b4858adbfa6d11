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
