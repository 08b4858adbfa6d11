//! nccl-tests' flags that act on NCCL itself (`-G`, `-R`, `-x`, `-M`,
//! `--explain`, `-D`, `-V`), as one typed set from the command line to the
//! backends. The NCCL backend applies them; a backend without NCCL lists
//! the ones it ignores (`CpuBackend::IGNORES`), and [`NcclOnlyFlags::ignored`]
//! words what the user is told about each, so a new NCCL-only flag is a
//! field and a variant here, with its line, and nothing else to remember.

use crate::Registration;

/// One NCCL-only flag. Every match on it is exhaustive, so a new flag
/// cannot be left without its line for the backends that ignore it; a new
/// one also goes in [`NcclOnly::ALL`] (the tests' `only` names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NcclOnly {
    /// `-G`: CUDA graph capture of the timed loop.
    CudaGraph,
    /// `-R`: registration of the test's buffers.
    Registration,
    /// `-x`: ncclConfig_t.CTAPolicy at communicator init.
    CtaPolicy,
    /// `-M`: the GPU memory report.
    Memory,
    /// `--explain`: the algorithm, protocol and channels NCCL reports.
    Explain,
    /// `-D`: a device-API implementation of the collectives.
    DeviceImplementation,
    /// `-V`: CTAs of the device-API implementation.
    DeviceCtaCount,
}

impl NcclOnly {
    /// Every NCCL-only flag, in the order their lines are said.
    pub const ALL: [NcclOnly; 7] = [
        NcclOnly::DeviceImplementation,
        NcclOnly::DeviceCtaCount,
        NcclOnly::CtaPolicy,
        NcclOnly::Memory,
        NcclOnly::CudaGraph,
        NcclOnly::Registration,
        NcclOnly::Explain,
    ];
}

/// The NCCL-only flags as given on the command line. Unset is each
/// field's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NcclOnlyFlags {
    /// `-G` > 0.
    pub cudagraph: bool,
    /// `-R`.
    pub registration: Registration,
    /// `-x`, when given.
    pub cta_policy: Option<i32>,
    /// `-M 1`.
    pub memory: bool,
    /// `--explain` as asked (a JSON or CSV record may still run the
    /// explanation pass without it; that is not the user's flag).
    pub explain: bool,
    /// `-D`, when given (0 = NCCL's own collectives).
    pub device_implementation: Option<i32>,
    /// `-V`, when given.
    pub device_cta_count: Option<i32>,
}

/// nccl-tests' -V range warning (its words), when `count` is outside it.
pub fn cta_count_warning(count: i32) -> Option<String> {
    (count <= 0 || count > 128).then(|| {
        format!(
            "device_cta_count (-V) must be positive and less than 128, got {count}. Using default value 16."
        )
    })
}

impl NcclOnlyFlags {
    /// Whether `flag` is given in a way the NCCL backend would act on
    /// (`-D 0` and `-V` within range change nothing elsewhere either).
    pub fn is_given(&self, flag: NcclOnly) -> bool {
        match flag {
            NcclOnly::CudaGraph => self.cudagraph,
            NcclOnly::Registration => self.registration.is_on(),
            NcclOnly::CtaPolicy => self.cta_policy.is_some(),
            NcclOnly::Memory => self.memory,
            NcclOnly::Explain => self.explain,
            NcclOnly::DeviceImplementation => self.device_implementation.is_some_and(|d| d != 0),
            NcclOnly::DeviceCtaCount => self.device_cta_count.and_then(cta_count_warning).is_some(),
        }
    }

    /// What a backend named `backend` (`cpu`, `mpi`) that ignores the
    /// flags `ignored` tells the user: one line per ignored flag given
    /// (`-G` and `-R` share one), or the one line that refuses the run
    /// (`-D` > 0 needs NCCL's device API).
    pub fn ignored(&self, ignored: &[NcclOnly], backend: &str) -> Result<Vec<String>, String> {
        let upper = backend.to_uppercase();
        let given = |f: &NcclOnly| ignored.contains(f) && self.is_given(*f);
        let mut lines = Vec::new();
        for flag in NcclOnly::ALL.iter().filter(|f| given(f)) {
            match flag {
                NcclOnly::DeviceImplementation => {
                    let d = self.device_implementation.unwrap_or(0);
                    return Err(format!(
                        "-D {d} (device_implementation) runs collectives through NCCL's device API, which the {backend} backend does not have: use --backend nccl, or -D 0"
                    ));
                }
                NcclOnly::DeviceCtaCount => {
                    lines.extend(self.device_cta_count.and_then(cta_count_warning));
                }
                NcclOnly::CtaPolicy => lines.push(format!(
                    "collbench: -x/--cta_policy sets an NCCL communicator option: it applies to the NCCL backend only (ignored on the {backend} backend)"
                )),
                NcclOnly::Memory => lines.push(format!(
                    "collbench: -M/--memory reports GPU memory: it applies to the NCCL backend only (no report on the {backend} backend)"
                )),
                // -G and -R share one line (one reason both do nothing
                // off NCCL), said at the first of them given.
                NcclOnly::CudaGraph | NcclOnly::Registration => {
                    if *flag == NcclOnly::CudaGraph || !given(&NcclOnly::CudaGraph) {
                        let both = [NcclOnly::CudaGraph, NcclOnly::Registration];
                        let named: Vec<&str> = both
                            .iter()
                            .filter(|f| given(f))
                            .map(|f| if *f == NcclOnly::CudaGraph { "-G/--cudagraph" } else { "-R/--local_register" })
                            .collect();
                        let verb = if named.len() == 1 { "is" } else { "are" };
                        lines.push(format!(
                            "collbench: {} {verb} ignored on the {upper} backend (CUDA graphs and NCCL buffer registration are GPU features)",
                            named.join(" and ")
                        ));
                    }
                }
                // The columns come from NCCL's profiler: a backend
                // without it has none to ask.
                NcclOnly::Explain => lines.push(format!(
                    "collbench: --explain adds nothing on the {upper} backend (it shows the algorithm, protocol and channels NCCL reports; use --backend nccl on GPUs)"
                )),
            }
        }
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each flag given alone, to something the NCCL backend acts on.
    fn only(flag: NcclOnly) -> NcclOnlyFlags {
        let mut f = NcclOnlyFlags::default();
        match flag {
            NcclOnly::CudaGraph => f.cudagraph = true,
            NcclOnly::Registration => f.registration = Registration::Local,
            NcclOnly::CtaPolicy => f.cta_policy = Some(1),
            NcclOnly::Memory => f.memory = true,
            NcclOnly::Explain => f.explain = true,
            NcclOnly::DeviceImplementation => f.device_implementation = Some(1),
            NcclOnly::DeviceCtaCount => f.device_cta_count = Some(200),
        }
        f
    }

    #[test]
    fn every_flag_ignored_says_so_and_others_say_nothing() {
        for flag in NcclOnly::ALL {
            let f = only(flag);
            assert!(f.is_given(flag), "{flag:?}");
            match f.ignored(&NcclOnly::ALL, "cpu") {
                Ok(lines) => assert_eq!(lines.len(), 1, "{flag:?}: {lines:?}"),
                Err(e) => assert_eq!(flag, NcclOnly::DeviceImplementation, "{e}"),
            }
            assert_eq!(f.ignored(&[], "cpu"), Ok(vec![]), "{flag:?}");
        }
        assert_eq!(
            NcclOnlyFlags::default().ignored(&NcclOnly::ALL, "cpu"),
            Ok(vec![])
        );
    }

    #[test]
    fn lines_keep_their_words_and_order() {
        let d0 = NcclOnlyFlags {
            device_implementation: Some(0),
            device_cta_count: Some(16),
            ..Default::default()
        };
        assert_eq!(d0.ignored(&NcclOnly::ALL, "cpu"), Ok(vec![]));
        let e = only(NcclOnly::DeviceImplementation)
            .ignored(&NcclOnly::ALL, "cpu")
            .unwrap_err();
        assert!(e.contains("use --backend nccl, or -D 0"), "{e}");
        let all = NcclOnlyFlags {
            cudagraph: true,
            registration: Registration::Symmetric,
            cta_policy: Some(1),
            memory: true,
            explain: true,
            device_implementation: None,
            device_cta_count: Some(200),
        };
        let lines = all.ignored(&NcclOnly::ALL, "cpu").unwrap();
        assert_eq!(
            lines,
            [
                "device_cta_count (-V) must be positive and less than 128, got 200. Using default value 16.",
                "collbench: -x/--cta_policy sets an NCCL communicator option: it applies to the NCCL backend only (ignored on the cpu backend)",
                "collbench: -M/--memory reports GPU memory: it applies to the NCCL backend only (no report on the cpu backend)",
                "collbench: -G/--cudagraph and -R/--local_register are ignored on the CPU backend (CUDA graphs and NCCL buffer registration are GPU features)",
                "collbench: --explain adds nothing on the CPU backend (it shows the algorithm, protocol and channels NCCL reports; use --backend nccl on GPUs)",
            ]
        );
    }

    #[test]
    fn cta_count_range_is_nccl_tests() {
        assert!(cta_count_warning(1).is_none());
        assert!(cta_count_warning(128).is_none());
        assert!(cta_count_warning(0).is_some());
        assert!(cta_count_warning(129).is_some());
    }
}
