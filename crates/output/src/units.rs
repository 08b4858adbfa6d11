//! The one place where numbers become text, so every printer, table,
//! chart and comparison shows sizes, times and bandwidths the same way:
//! nccl-tests' C formats ([`fixed_width`], [`c_exp`], [`c_g`]) for the text
//! layout, and short fixed forms ([`bytes`], [`gbps`], [`us`], ...) for
//! Markdown, HTML and comparisons.

use collbench_core::size::{format_bytes, ByteStyle};

/// Bytes with a binary unit: `8 B`, `64 KiB`, `1.5 MiB`, `8 GiB`.
/// Exact multiples print without decimals so table rows stay short.
pub fn bytes(n: u64) -> String {
    format_bytes(n, ByteStyle::Table)
}

/// Bytes for a chart axis, where space is short: `8`, `64K`, `8G` (the
/// form users write on the command line).
pub fn bytes_short(n: f64) -> String {
    format_bytes(n.round().max(0.0) as u64, ByteStyle::Flag)
}

/// A bandwidth in GB/s with two decimals, as nccl-tests prints it, or
/// more below 1 ([`figure`]).
pub fn gbps(v: f64) -> String {
    figure(v)
}

/// A time in microseconds with two decimals, or more below 1
/// ([`figure`]).
pub fn us(v: f64) -> String {
    figure(v)
}

/// Two decimals, as nccl-tests prints; a figure below 1 keeps four
/// significant digits (trailing zeros past two decimals dropped), so a
/// log's `0.2346` is not shown as `0.23` nor its `0.23` as `0.2300`.
pub fn figure(v: f64) -> String {
    if !v.is_finite() || v == 0.0 || v.abs() >= 1.0 {
        return format!("{v:.2}");
    }
    let decimals = (3 - v.abs().log10().floor() as i64).clamp(2, 12) as usize;
    let text = format!("{v:.decimals$}");
    let point = text.find('.').unwrap_or(text.len());
    let keep = text.trim_end_matches('0').len().max(point + 3);
    text[..keep].to_string()
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

/// nccl-tests' fixed-width float: two decimals if they fit in `width`,
/// else one, else none, else exponent form cut to `width`.
pub fn fixed_width(value: f64, width: usize) -> String {
    for prec in [2usize, 1, 0] {
        let s = format!("{value:>width$.prec$}");
        if s.len() <= width {
            return s;
        }
    }
    let s = c_exp(value, if width >= 7 { 1 } else { 0 });
    let s = format!("{s:>width$}");
    s.chars().take(width).collect()
}

/// C's `%.{prec}e` (two-digit exponent with sign, e.g. `1.2e+07`).
pub fn c_exp(value: f64, prec: usize) -> String {
    let s = format!("{value:.prec$e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let exp: i32 = e.parse().unwrap_or(0);
            let sign = if exp < 0 { '-' } else { '+' };
            format!("{m}e{sign}{:02}", exp.abs())
        }
        None => s,
    }
}

/// C's `%g` (6 significant digits, trailing zeros removed).
pub fn c_g(value: f64) -> String {
    if value == 0.0 {
        return "0".into();
    }
    if !value.is_finite() {
        return if value.is_nan() {
            "nan".into()
        } else if value > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let exp = value.abs().log10().floor() as i32;
    // Rounding to 6 digits may carry into the next power of ten.
    let rounded: f64 = format!("{value:.5e}").parse().unwrap_or(value);
    let exp = if rounded.abs() >= 10f64.powi(exp + 1) {
        exp + 1
    } else {
        exp
    };
    if !(-4..6).contains(&exp) {
        let s = c_exp(value, 5);
        let (m, e) = s.split_once('e').unwrap_or((&s, ""));
        let m = trim_zeros(m);
        format!("{m}e{e}")
    } else {
        let prec = (5 - exp).max(0) as usize;
        trim_zeros(&format!("{value:.prec$}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_figures_keep_their_digits() {
        assert_eq!(figure(0.2346), "0.2346");
        assert_eq!(figure(0.23), "0.23");
        assert_eq!(figure(0.5), "0.50");
        assert_eq!(figure(0.0212754), "0.02128");
        assert_eq!(figure(0.0), "0.00");
        assert_eq!(figure(12.5), "12.50");
        assert_eq!(figure(1716.17), "1716.17");
        assert_eq!(figure(-0.25), "-0.25");
    }

    #[test]
    fn fixed_width_matches_nccl_tests() {
        for (value, width, want) in [
            (12.5386, 7, "  12.54"),
            (1716.17, 7, "1716.17"),
            (12520.4, 7, "12520.4"),
            (24571.94, 7, "24571.9"),
            (1234567.8, 7, "1234568"),
            (12345678.0, 7, "1.2e+07"),
            (349.58, 6, "349.58"),
            (0.000638, 6, "  0.00"),
        ] {
            assert_eq!(fixed_width(value, width), want, "{value} in {width}");
        }
    }

    #[test]
    fn bytes_use_binary_units_and_numbers_fixed_decimals() {
        for (got, want) in [
            (bytes(8), "8 B"),
            (bytes(1024), "1 KiB"),
            (bytes(1536), "1.5 KiB"),
            (bytes(8589934592), "8 GiB"),
            (bytes_short(8589934592.0), "8G"),
            (bytes_short(512.0), "512"),
            // Numbers have fixed decimals.
            (gbps(349.579), "349.58"),
            (us(12.5), "12.50"),
            (ratio(0.9), "0.900"),
            (pct(5.0), "5%"),
            (wrong(None), "N/A"),
        ] {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn g_matches_c() {
        for (value, want) in [
            (112.2234, "112.223"),
            (117.391, "117.391"),
            (0.0, "0"),
            (1.0, "1"),
            (1234567.0, "1.23457e+06"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (999999.5, "1e+06"),
        ] {
            assert_eq!(c_g(value), want, "%g of {value}");
        }
    }
}
