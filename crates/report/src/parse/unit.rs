//! Units printed in log headers, and the factors that bring figures to
//! collbench's own: microseconds and decimal GB/s. A unit not listed here is
//! an error: a guess would give a figure off by 1000 without a word.

/// The units a table's figures were printed in, kept next to the normalised
/// figures so reports can name (and OSU can show) what the tool printed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SourceUnits {
    /// `us`, `ms`, `s` or `ns`.
    pub time: &'static str,
    /// `GB/s`, `MB/s`, ...
    pub bandwidth: &'static str,
}

impl Default for SourceUnits {
    fn default() -> Self {
        SourceUnits {
            time: "us",
            bandwidth: "GB/s",
        }
    }
}

impl SourceUnits {
    /// Whether these are collbench's own units (nothing to say about them).
    pub fn is_default(&self) -> bool {
        *self == SourceUnits::default()
    }

    /// Factor from a time in `self.time` to microseconds.
    pub fn to_us(&self) -> f64 {
        time(self.time).map_or(1.0, |(_, f)| f)
    }

    /// Factor from a bandwidth in `self.bandwidth` to decimal GB/s.
    pub fn to_gbps(&self) -> f64 {
        bandwidth(self.bandwidth).map_or(1.0, |(_, f)| f)
    }
}

/// A time unit's canonical name and its factor to microseconds.
pub fn time(unit: &str) -> Option<(&'static str, f64)> {
    Some(match unit.trim() {
        "us" | "usec" | "µs" | "μs" => ("us", 1.0),
        "ms" | "msec" => ("ms", 1e3),
        "s" | "sec" => ("s", 1e6),
        "ns" | "nsec" => ("ns", 1e-3),
        _ => return None,
    })
}

/// A bandwidth unit's canonical name and its factor to decimal GB/s.
/// `Gb/s` and `Gbps` are bits.
pub fn bandwidth(unit: &str) -> Option<(&'static str, f64)> {
    Some(match unit.trim() {
        "GB/s" | "GB/sec" | "GBps" => ("GB/s", 1.0),
        "MB/s" | "MB/sec" | "MBps" => ("MB/s", 1e-3),
        "KB/s" | "kB/s" => ("KB/s", 1e-6),
        "TB/s" => ("TB/s", 1e3),
        "B/s" => ("B/s", 1e-9),
        "GiB/s" => ("GiB/s", 1.073_741_824),
        "MiB/s" => ("MiB/s", 1.048_576e-3),
        "Gb/s" | "Gbps" | "Gbit/s" => ("Gb/s", 0.125),
        _ => return None,
    })
}

/// The unit in a header cell's parentheses: `Avg Latency(us)` -> `us`,
/// `Bandwidth (MB/s)` -> `MB/s`, `(us)` -> `us`.
pub fn in_parens(cell: &str) -> Option<&str> {
    let open = cell.rfind('(')?;
    let close = open + cell[open..].find(')')?;
    Some(cell[open + 1..close].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_units_only() {
        assert_eq!(time("ms"), Some(("ms", 1e3)));
        assert_eq!(bandwidth("MB/s"), Some(("MB/s", 1e-3)));
        assert_eq!(time("fortnights"), None);
        assert_eq!(bandwidth("furlongs/s"), None);
        assert_eq!(in_parens("Avg Latency(us)"), Some("us"));
        assert_eq!(in_parens("Bandwidth (MB/s)"), Some("MB/s"));
        assert_eq!(in_parens("Size"), None);
    }
}
