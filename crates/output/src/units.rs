//! Number formatting shared by every printer, so each shows the same
//! value the same way.

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
    fn fixed_width_matches_nccl_tests() {
        assert_eq!(fixed_width(12.5386, 7), "  12.54");
        assert_eq!(fixed_width(1716.17, 7), "1716.17");
        assert_eq!(fixed_width(12520.4, 7), "12520.4");
        assert_eq!(fixed_width(24571.94, 7), "24571.9");
        assert_eq!(fixed_width(1234567.8, 7), "1234568");
        assert_eq!(fixed_width(12345678.0, 7), "1.2e+07");
        assert_eq!(fixed_width(349.58, 6), "349.58");
        assert_eq!(fixed_width(0.000638, 6), "  0.00");
    }

    #[test]
    fn g_matches_c() {
        assert_eq!(c_g(112.2234), "112.223");
        assert_eq!(c_g(117.391), "117.391");
        assert_eq!(c_g(0.0), "0");
        assert_eq!(c_g(1.0), "1");
        assert_eq!(c_g(1234567.0), "1.23457e+06");
        assert_eq!(c_g(0.0001), "0.0001");
        assert_eq!(c_g(0.00001234), "1.234e-05");
        assert_eq!(c_g(999999.5), "1e+06");
    }
}
