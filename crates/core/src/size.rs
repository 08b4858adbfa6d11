//! Sizes as users write them (`8`, `64K`, `8G`) and the sweeps they make.

use crate::ParseError;

/// Parses a byte count with an optional binary suffix: K, M, G, T (also
/// KB/KiB and lower case). `1K` is 1024 bytes, as in nccl-tests.
pub fn parse_size(s: &str) -> Result<u64, ParseError> {
    let t = s.trim();
    let err = || ParseError::Size(s.to_string());
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(err());
    }
    let n: u64 = num.parse().map_err(|_| err())?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(err()),
    };
    n.checked_mul(1u64 << shift).ok_or_else(err)
}

/// How [`format_bytes`] writes a byte count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteStyle {
    /// The way users write sizes, read back exactly by [`parse_size`]:
    /// `8`, `64K`, `8G`, and `1536` when no unit divides the count.
    Flag,
    /// For tables: a binary unit with a space, `8 B`, `64 KiB`, `8 GiB`,
    /// one decimal when no unit divides the count (`1.5 KiB`).
    Table,
}

/// The one byte-count formatter: every message, table and chart axis
/// writes sizes through it, in one of two [`ByteStyle`]s.
pub fn format_bytes(bytes: u64, style: ByteStyle) -> String {
    for (shift, suffix) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        let unit = 1u64 << shift;
        if bytes < unit {
            continue;
        }
        let exact = bytes.is_multiple_of(unit);
        return match (style, exact) {
            (ByteStyle::Flag, true) => format!("{}{suffix}", bytes / unit),
            (ByteStyle::Flag, false) => bytes.to_string(),
            (ByteStyle::Table, true) => format!("{} {suffix}iB", bytes / unit),
            (ByteStyle::Table, false) => {
                format!("{:.1} {suffix}iB", bytes as f64 / unit as f64)
            }
        };
    }
    match style {
        ByteStyle::Flag => bytes.to_string(),
        ByteStyle::Table => format!("{bytes} B"),
    }
}

/// Formats a byte count the short way users write it (`8`, `64K`, `8G`):
/// [`format_bytes`] in [`ByteStyle::Flag`].
pub fn format_size(bytes: u64) -> String {
    format_bytes(bytes, ByteStyle::Flag)
}

/// How one size leads to the next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Multiply by this factor (`-f`, at least 2).
    Factor(u64),
    /// Add this many bytes (`-i`, at least 1).
    Bytes(u64),
}

/// Errors in a sweep definition: the one place where the sweep's limits
/// are checked. The words name no flag: the sweep may come from `run`'s
/// flags, a launch file's or a baseline's, and the caller that knows
/// which names them (the CLI's `flag_words`).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SweepError {
    #[error("the smallest size ({min}) is larger than the largest ({max})")]
    MinAboveMax { min: u64, max: u64 },
    #[error("the step factor must be 2 or more (got {0})")]
    Factor(u64),
    #[error("the step in bytes must be at least 1")]
    ZeroStep,
    /// More sizes than [`MAX_SIZES`]: the list alone would take gigabytes
    /// (`-b 8 -e 1G -i 1` is a billion sizes).
    #[error("sizes {min}..{max} with this step make {count} sizes, more than collbench's limit of {MAX_SIZES}")]
    TooMany { min: u64, max: u64, count: u64 },
}

/// The most sizes one sweep may have. nccl-tests has no limit (it never
/// lists them); 65536 sizes is already more than a day of measuring at
/// one second a size, and the list stays a few megabytes.
pub const MAX_SIZES: u64 = 1 << 16;

/// How many sizes [`sweep`] would list, counted without listing them.
fn count_sizes(min: u64, max: u64, step: Step) -> u64 {
    match step {
        Step::Bytes(b) => (max - min) / b + 1,
        // A factor of 2 or more reaches u64::MAX within 64 steps.
        Step::Factor(f) => {
            let (mut s, mut n) = (min, 1);
            while let Some(next) = s.max(1).checked_mul(f).filter(|&x| x <= max) {
                s = next;
                n += 1;
            }
            n
        }
    }
}

/// The sizes from `min` to `max` inclusive, as nccl-tests sweeps them.
pub fn sweep(min: u64, max: u64, step: Step) -> Result<Vec<u64>, SweepError> {
    if min > max {
        return Err(SweepError::MinAboveMax { min, max });
    }
    let mut sizes = Vec::new();
    let mut s = min;
    match step {
        Step::Factor(f) if f < 2 => return Err(SweepError::Factor(f)),
        Step::Bytes(0) => return Err(SweepError::ZeroStep),
        _ => {}
    }
    let count = count_sizes(min, max, step);
    if count > MAX_SIZES {
        return Err(SweepError::TooMany { min, max, count });
    }
    loop {
        sizes.push(s);
        let next = match step {
            // A zero minimum would never grow; nccl-tests moves on to 1.
            Step::Factor(f) => s.max(1).checked_mul(f),
            Step::Bytes(b) => s.checked_add(b),
        };
        match next {
            Some(n) if n <= max => s = n,
            _ => break,
        }
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bytes_in_both_styles() {
        assert_eq!(format_bytes(8, ByteStyle::Table), "8 B");
        assert_eq!(format_bytes(1024, ByteStyle::Table), "1 KiB");
        assert_eq!(format_bytes(1536, ByteStyle::Table), "1.5 KiB");
        assert_eq!(format_bytes(8 << 30, ByteStyle::Table), "8 GiB");
        assert_eq!(format_bytes(8 << 30, ByteStyle::Flag), "8G");
        assert_eq!(format_bytes(1536, ByteStyle::Flag), "1536");
        assert_eq!(format_bytes(512, ByteStyle::Flag), "512");
        assert_eq!(format_bytes(0, ByteStyle::Flag), "0");
    }

    #[test]
    fn suffixes_are_binary() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("1K").unwrap(), 1024);
        assert_eq!(parse_size("64M").unwrap(), 64 << 20);
        assert_eq!(parse_size("8G").unwrap(), 8 << 30);
        assert_eq!(parse_size("2gib").unwrap(), 2 << 30);
        for bad in ["", "K", "1.5M", "12X", "-1", "99999999999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sweeps() {
        assert_eq!(sweep(8, 64, Step::Factor(2)).unwrap(), vec![8, 16, 32, 64]);
        assert_eq!(sweep(8, 100, Step::Factor(4)).unwrap(), vec![8, 32]);
        assert_eq!(sweep(1, 3, Step::Bytes(1)).unwrap(), vec![1, 2, 3]);
        assert!(sweep(64, 8, Step::Factor(2)).is_err());
        assert!(sweep(8, 64, Step::Factor(1)).is_err());
        assert_eq!(sweep(8 << 30, 8 << 30, Step::Factor(2)).unwrap().len(), 1);
    }

    #[test]
    fn a_sweep_of_too_many_sizes_is_refused_before_listing_them() {
        let e = sweep(8, 1 << 30, Step::Bytes(1)).unwrap_err();
        assert_eq!(
            e,
            SweepError::TooMany {
                min: 8,
                max: 1 << 30,
                count: (1 << 30) - 7
            }
        );
        assert_eq!(sweep(1, MAX_SIZES, Step::Bytes(1)).unwrap().len(), 65536);
        assert!(sweep(0, MAX_SIZES, Step::Bytes(1)).is_err());
        assert_eq!(sweep(0, u64::MAX, Step::Factor(2)).unwrap().len(), 64);
        assert_eq!(count_sizes(0, u64::MAX, Step::Factor(2)), 64);
        assert_eq!(
            sweep(u64::MAX, u64::MAX, Step::Bytes(u64::MAX))
                .unwrap()
                .len(),
            1
        );
    }

    proptest! {
        #[test]
        fn format_parse_round_trip(n in 0u64..(1 << 40)) {
            prop_assert_eq!(parse_size(&format_size(n)).unwrap(), n);
        }

        #[test]
        fn sweep_is_increasing_and_bounded(min in 0u64..1 << 30, span in 0u64..1 << 30, f in 2u64..9) {
            let s = sweep(min, min + span, Step::Factor(f)).unwrap();
            prop_assert_eq!(s[0], min);
            prop_assert!(s.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(*s.last().unwrap() <= min + span);
        }
    }
}
