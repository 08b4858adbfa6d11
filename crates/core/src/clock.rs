//! UTC dates without a date crate: the record's start time, the `-S`
//! timestamp column and nccl-tests' JSON all print the same civil time.

/// `(YYYY-MM-DD, HH:MM:SS)` in UTC for `unix_secs` seconds since 1970.
pub fn utc_parts(unix_secs: u64) -> (String, String) {
    let (days, rem) = ((unix_secs / 86400) as i64, unix_secs % 86400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        format!("{year:04}-{month:02}-{day:02}"),
        format!("{:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        let s = |d: &str, t: &str| (d.to_string(), t.to_string());
        assert_eq!(utc_parts(0), s("1970-01-01", "00:00:00"));
        assert_eq!(utc_parts(951_782_400), s("2000-02-29", "00:00:00"));
        assert_eq!(utc_parts(1_796_081_999), s("2026-11-30", "23:39:59"));
    }
}
