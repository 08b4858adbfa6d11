//! `-M 1`: nccl-tests' `# GPU memory usage` line, printed after a
//! collective's "Collective test concluded" line.

/// nccl-tests' three figures, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GpuMemory {
    pub initialization: i64,
    pub user_allocated: i64,
    pub collective: i64,
}

/// An amount as nccl-tests writes it: B, KB, MB or GB (binary), two
/// decimals under 10, one under 100, none above.
fn amount(bytes: i64) -> String {
    let mut v = bytes as f64;
    let mut unit = " B";
    for (limit, name) in [(1u64 << 30, " GB"), (1 << 20, " MB"), (1 << 10, " KB")] {
        if v.abs() >= limit as f64 {
            v /= limit as f64;
            unit = name;
            break;
        }
    }
    let prec = if v.abs() < 10.0 {
        2
    } else if v.abs() < 100.0 {
        1
    } else {
        0
    };
    format!("{v:.prec$}{unit}")
}

/// The whole line, newline included.
pub fn line(m: &GpuMemory) -> String {
    let total = m.initialization + m.user_allocated + m.collective;
    format!(
        "# {:<20} : Initialization {} | User-Allocated {} | Collective {} | Total  {}\n",
        "GPU memory usage",
        amount(m.initialization),
        amount(m.user_allocated),
        amount(m.collective),
        amount(total)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_as_nccl_tests() {
        for (bytes, want) in [
            (0, "0.00 B"),
            (512, "512 B"),
            (1536, "1.50 KB"),
            (50 << 20, "50.0 MB"),
            (3 << 30, "3.00 GB"),
            (-(2 << 20), "-2.00 MB"),
        ] {
            assert_eq!(amount(bytes), want, "{bytes}");
        }
    }

    #[test]
    fn the_line() {
        let m = GpuMemory {
            initialization: 600 << 20,
            user_allocated: 2 << 30,
            collective: 0,
        };
        assert_eq!(
            line(&m),
            "# GPU memory usage     : Initialization 600 MB | User-Allocated 2.00 GB | Collective 0.00 B | Total  2.59 GB\n"
        );
    }

    #[test]
    fn the_line_sits_between_the_closing_line_and_the_last_hash() {
        let m = GpuMemory::default();
        let f = crate::text::footer_with_memory("all_reduce", &[], Some(&m));
        assert!(
            f.ends_with("# Collective test concluded: all_reduce_perf\n# GPU memory usage     : Initialization 0.00 B | User-Allocated 0.00 B | Collective 0.00 B | Total  0.00 B\n#\n"),
            "{f}"
        );
        // Without -M the footer is unchanged.
        assert_eq!(
            crate::text::footer_with_memory("all_reduce", &[], None),
            crate::text::footer("all_reduce", &[])
        );
    }
}
