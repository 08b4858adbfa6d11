//! The one place where numbers become text, so every table, chart and
//! comparison shows sizes, times and bandwidths the same way.

/// Bytes with a binary unit: `8 B`, `64 KiB`, `1.5 MiB`, `8 GiB`.
/// Exact multiples print without decimals so table rows stay short.
pub fn bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (unit, name) in UNITS {
        if n >= unit {
            // Units are powers of two, so the mask tests exact multiples.
            return if n & (unit - 1) == 0 {
                format!("{} {name}", n / unit)
            } else {
                format!("{:.1} {name}", n as f64 / unit as f64)
            };
        }
    }
    format!("{n} B")
}

/// Bytes for a chart axis, where space is short: `8`, `64K`, `8G`.
pub fn bytes_short(n: f64) -> String {
    let n = n.round().max(0.0) as u64;
    bytes(n)
        .replace(" B", "")
        .replace("iB", "")
        .replace(' ', "")
}

/// A bandwidth in GB/s with two decimals, as nccl-tests prints it.
pub fn gbps(v: f64) -> String {
    format!("{v:.2}")
}

/// A time in microseconds with two decimals.
pub fn us(v: f64) -> String {
    format!("{v:.2}")
}

/// A NEW/BASE ratio: `0.900`.
pub fn ratio(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.3}")
    } else {
        "-".to_string()
    }
}

/// A percentage threshold: `5%`, `12.5%`.
pub fn pct(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}%")
    } else {
        format!("{v}%")
    }
}

/// A wrong-element count; `N/A` when it was not checked.
pub fn wrong(v: Option<u64>) -> String {
    v.map_or_else(|| "N/A".to_string(), |w| w.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_uses_binary_units() {
        assert_eq!(bytes(8), "8 B");
        assert_eq!(bytes(1024), "1 KiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(8589934592), "8 GiB");
        assert_eq!(bytes_short(8589934592.0), "8G");
        assert_eq!(bytes_short(512.0), "512");
    }

    #[test]
    fn numbers_have_fixed_decimals() {
        assert_eq!(gbps(349.579), "349.58");
        assert_eq!(us(12.5), "12.50");
        assert_eq!(ratio(0.9), "0.900");
        assert_eq!(pct(5.0), "5%");
        assert_eq!(wrong(None), "N/A");
    }
}
