//! The bounds of the numbers a user hands collbench (flags, launcher
//! variables, baseline and topology files), each with its reason, in one
//! place: every reader checks against these, so a hostile value is one
//! line at the seam instead of a panic, a wrapped port or a verdict that
//! can never pass.

/// The longest time any timeout or deadline flag takes: a year. Longer is
/// "never" in practice, and a start time plus it must not overflow
/// (`Instant + 2^64 s` panics: "overflow when adding duration to instant").
pub const MAX_SECONDS: u64 = 365 * 24 * 3600;

/// The most ranks (processes times threads) a job may have, and so the
/// most hosts a topology may describe (each holds a rank at least).
pub const MAX_RANKS: u64 = 1 << 20;

/// The largest bandwidth a file may state, GB/s: 100 TB/s, some fifty
/// times what one GPU moves over NVLink 5 (1.8 TB/s). A figure above it
/// is a typo or `inf`, and a baseline holding it fails every machine.
pub const MAX_GBPS: f64 = 100_000.0;

/// The longest time per operation a baseline may state, microseconds:
/// an hour. `max_time_us = inf` passed every machine.
pub const MAX_TIME_US: f64 = 3_600_000_000.0;

/// Whether `x` is a number above 0 and at most `max` (NaN and inf are not).
pub fn positive_at_most(x: f64, max: f64) -> bool {
    x.is_finite() && x > 0.0 && x <= max
}

/// `seconds` when it is from `min` to [`MAX_SECONDS`]; else the words
/// that name the range, for the flag's one line.
pub fn seconds_from(text: &str, min: u64) -> Result<u64, String> {
    let never = if min == 0 { " (never)" } else { "" };
    match text.trim().parse::<u64>() {
        Ok(n) if (min..=MAX_SECONDS).contains(&n) => Ok(n),
        _ => Err(format!(
            "give whole seconds from {min}{never} to {MAX_SECONDS} (a year), e.g. 300"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inf_nan_zero_and_past_the_bound_are_out() {
        for bad in [f64::INFINITY, f64::NAN, 0.0, -1.0, 1e308, MAX_GBPS * 1.01] {
            assert!(!positive_at_most(bad, MAX_GBPS), "{bad}");
        }
        assert!(positive_at_most(349.6, MAX_GBPS));
        assert!(positive_at_most(MAX_GBPS, MAX_GBPS));
    }

    #[test]
    fn seconds_stop_at_a_year_so_a_deadline_never_overflows() {
        assert_eq!(seconds_from("60", 1), Ok(60));
        assert_eq!(seconds_from("0", 0), Ok(0));
        assert_eq!(seconds_from(&MAX_SECONDS.to_string(), 1), Ok(MAX_SECONDS));
        for bad in [
            "0",
            "31536001",
            "18446744073709551615",
            "9223372036854775807",
            "1e9",
            "-1",
        ] {
            let e = seconds_from(bad, 1).unwrap_err();
            assert!(e.contains("from 1 to 31536000 (a year)"), "{bad}: {e}");
        }
        // The bound itself is safe to add to now.
        let _ = std::time::Instant::now() + std::time::Duration::from_secs(MAX_SECONDS);
    }
}
