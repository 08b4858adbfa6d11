//! `run`'s words for a case that did not fit in memory. The backends say
//! what was asked and what was there ([`Shortfall`]); only `run` knows
//! that `-e`, `-u` and `--ranks` set the largest size, the misalignment
//! and the ranks, so the flags and the fix are named here.

use collbench_core::size::format_size;
use collbench_runner::memory::gib;
use collbench_runner::Shortfall;

/// The one line for a shortfall, naming `run`'s flags.
pub fn memory_words(s: &Shortfall) -> String {
    match s {
        Shortfall::HostBuffer { bytes, buffer } => format!(
            "cannot allocate {bytes} bytes for a {buffer} buffer: lower -e (maximum size) or use fewer ranks"
        ),
        Shortfall::HostSweep {
            op,
            size,
            need,
            available,
            ranks,
            fits,
        } => {
            let advice = match fits {
                Some(s) => format!("use -e {} or fewer --ranks", format_size(*s)),
                None => "use fewer --ranks".to_string(),
            };
            format!(
                "{op} -e {} needs {} of host memory with {ranks} ranks; {} is available: {advice}",
                format_size(*size),
                gib(*need),
                gib(*available),
            )
        }
        Shortfall::HostUnalign {
            op,
            size,
            need,
            ranks,
            unalign,
        } => format!(
            "{op} -e {} with -u {unalign} needs {} of host memory with {ranks} ranks, more than is free: -u/--unalign adds {unalign} elements to every buffer, so use a smaller -u (e.g. -u 1)",
            format_size(*size),
            gib(*need),
        ),
        Shortfall::RankThread { rank, ranks, cause } => {
            format!("cannot start rank thread {rank} of {ranks}: {cause}: use fewer --ranks")
        }
        Shortfall::Gpu { .. } => format!("{s}; lower -e"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::Collective;

    #[test]
    fn run_names_its_flags_in_the_fix() {
        let gpu = Shortfall::Gpu {
            cause: "cuMemAlloc failed: out of memory".into(),
            bytes: 1 << 30,
            ordinal: 1,
            free: 600,
            total: 1000,
        };
        assert_eq!(
            memory_words(&gpu),
            "cuMemAlloc failed: out of memory for 1073741824 bytes on GPU 1 (600 of 1000 bytes free): the largest size that fits is about 300 bytes; lower -e"
        );
        let thread = Shortfall::RankThread {
            rank: 3,
            ranks: 4,
            cause: "Resource temporarily unavailable (os error 11)".into(),
        };
        assert_eq!(
            memory_words(&thread),
            "cannot start rank thread 3 of 4: Resource temporarily unavailable (os error 11): use fewer --ranks"
        );
        let buffer = Shortfall::HostBuffer {
            bytes: 64,
            buffer: "send",
        };
        assert!(memory_words(&buffer).contains("lower -e"));
        let none_fits = Shortfall::HostSweep {
            op: Collective::AllReduce,
            size: 1 << 28,
            need: 1 << 31,
            available: 1,
            ranks: 2,
            fits: None,
        };
        assert!(memory_words(&none_fits).ends_with(": use fewer --ranks"));
    }
}
