//! nccl-tests' flags whose meaning depends on the NCCL found at run time:
//! `-x` (CTA policy), `-D` and `-V` (device-API implementations). Pure
//! decisions with nccl-tests' messages, so they are tested without a GPU.

use crate::NcclOptions;

const V2_27: i32 = 22700;
const V2_28: i32 = 22800;
const V2_29: i32 = 22900;

/// `-x`: the policy to set at communicator init, and nccl-tests' line
/// when this NCCL cannot take it (the run goes on without it). A
/// negative policy means "do not set", as in nccl-tests.
pub(crate) fn cta_policy(version: i32, asked: Option<i32>) -> (Option<i32>, Option<String>) {
    match asked {
        None => (None, None),
        Some(_) if version < V2_27 => (
            None,
            Some("Option -x (cta_policy) is not supported before NCCL 2.27. Ignoring".into()),
        ),
        Some(p) if p > 1 && version < V2_28 => (
            None,
            Some(format!(
                "Option -x (cta_policy) {p} is not supported before NCCL 2.28. Ignoring"
            )),
        ),
        Some(p) if p < 0 => (None, None),
        Some(p) => (Some(p), None),
    }
}

/// `-D` and `-V` in nccl-tests' order: either needs NCCL >= 2.28.0; a
/// CTA count outside 1..=128 warns and falls back to 16; `-D > 0` needs
/// `-R 2`; the kernels are NCCL 2.28's device API, which 2.29 changed
/// (nccl-tests built on 2.28 refuses 2.29 the same way); and only the
/// implementations collbench carries run (`-D 1` and `-D 2`, NVLink).
/// Returns the warnings, or the one line that stops the run.
pub(crate) fn device_api(version: i32, opts: &NcclOptions) -> Result<Vec<String>, String> {
    if opts.nccl_only.device_implementation.is_some() && version < V2_28 {
        return Err("Option -D (device implementation) requires NCCL >= 2.28.0".into());
    }
    let mut warnings = Vec::new();
    if let Some(v) = opts.nccl_only.device_cta_count {
        if version < V2_28 {
            return Err("Option -V (device CTA count) requires NCCL >= 2.28.0".into());
        }
        warnings.extend(collbench_core::nccl_only::cta_count_warning(v));
    }
    let d = opts.nccl_only.device_implementation.unwrap_or(0);
    if d > 0 && opts.nccl_only.registration != collbench_core::Registration::Symmetric {
        return Err(
            "device implementation (-D > 0) requires enabling symmetric memory registration (-R 2)"
                .into(),
        );
    }
    if d == 0 {
        return Ok(warnings);
    }
    if version >= V2_29 {
        return Err(format!(
            "Incompatible NCCL versions: collbench's -D kernels use NCCL 2.28's device API, which NCCL {} does not keep: run with NCCL 2.28 (--nccl-lib), or -D 0",
            version_text(version)
        ));
    }
    match d {
        1 | 2 => Ok(warnings),
        3 | 4 => Err(format!(
            "Device implementation {d} is not supported by this collbench: nccl-tests' -D 3 and 4 (multimem all_reduce; GIN alltoall, NCCL >= 2.28.7) are not carried: use -D 1 or -D 2 (NVLink), or -D 0"
        )),
        _ => Err(format!(
            "Device implementation {d} is not supported by this test: use -D 1 or -D 2 (NVLink), or -D 0"
        )),
    }
}

/// NCCL's version code (22803) as 2.28.3.
fn version_text(code: i32) -> String {
    format!("{}.{}.{}", code / 10000, code / 100 % 100, code % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cta_policy_follows_the_nccl_version() {
        assert_eq!(cta_policy(22803, None), (None, None));
        assert_eq!(cta_policy(22803, Some(2)), (Some(2), None));
        assert_eq!(cta_policy(22700, Some(1)), (Some(1), None));
        assert_eq!(cta_policy(22803, Some(-1)), (None, None));
        let (p, m) = cta_policy(22700, Some(2));
        assert_eq!(p, None);
        assert_eq!(
            m.unwrap(),
            "Option -x (cta_policy) 2 is not supported before NCCL 2.28. Ignoring"
        );
        let (p, m) = cta_policy(22605, Some(0));
        assert_eq!(p, None);
        assert_eq!(
            m.unwrap(),
            "Option -x (cta_policy) is not supported before NCCL 2.27. Ignoring"
        );
    }

    fn opts(d: Option<i32>, v: Option<i32>, register: u32) -> NcclOptions {
        NcclOptions {
            nccl_only: collbench_core::NcclOnlyFlags {
                device_implementation: d,
                device_cta_count: v,
                registration: collbench_core::Registration::from_flag(register).unwrap(),
                ..Default::default()
            },
            ..NcclOptions::default()
        }
    }

    #[test]
    fn device_api_checks_in_nccl_tests_order() {
        assert_eq!(device_api(22700, &opts(None, None, 0)), Ok(vec![]));
        assert_eq!(device_api(22803, &opts(Some(0), Some(16), 0)), Ok(vec![]));
        assert_eq!(
            device_api(22700, &opts(Some(0), None, 0)),
            Err("Option -D (device implementation) requires NCCL >= 2.28.0".into())
        );
        assert_eq!(
            device_api(22700, &opts(None, Some(16), 0)),
            Err("Option -V (device CTA count) requires NCCL >= 2.28.0".into())
        );
        assert_eq!(
            device_api(22803, &opts(None, Some(0), 0)),
            Ok(vec![
                "device_cta_count (-V) must be positive and less than 128, got 0. Using default value 16.".into()
            ])
        );
        assert_eq!(
            device_api(22803, &opts(Some(1), None, 1)),
            Err("device implementation (-D > 0) requires enabling symmetric memory registration (-R 2)".into())
        );
        assert_eq!(device_api(22803, &opts(Some(1), Some(32), 2)), Ok(vec![]));
        assert_eq!(device_api(22803, &opts(Some(2), None, 2)), Ok(vec![]));
    }

    #[test]
    fn device_api_runs_the_carried_implementations_on_nccl_2_28_only() {
        let e = device_api(22905, &opts(Some(1), None, 2)).unwrap_err();
        assert!(e.starts_with("Incompatible NCCL versions"), "{e}");
        assert!(e.contains("NCCL 2.29.5 does not keep"), "{e}");
        // -D 0 is NCCL's own collectives: any 2.28+ runs it.
        assert_eq!(device_api(22905, &opts(Some(0), None, 0)), Ok(vec![]));
        let e = device_api(22803, &opts(Some(3), None, 2)).unwrap_err();
        assert!(
            e.starts_with("Device implementation 3 is not supported by this collbench")
                && e.ends_with("use -D 1 or -D 2 (NVLink), or -D 0"),
            "{e}"
        );
        assert_eq!(
            device_api(22803, &opts(Some(7), None, 2)).unwrap_err(),
            "Device implementation 7 is not supported by this test: use -D 1 or -D 2 (NVLink), or -D 0"
        );
        // Negative: no -R 2 needed (nccl-tests checks -D > 0), still refused.
        let e = device_api(22803, &opts(Some(-1), None, 0)).unwrap_err();
        assert!(
            e.starts_with("Device implementation -1 is not supported"),
            "{e}"
        );
    }

    #[test]
    fn version_codes_read_as_nccl_prints_them() {
        assert_eq!(version_text(22803), "2.28.3");
        assert_eq!(version_text(22905), "2.29.5");
    }
}
