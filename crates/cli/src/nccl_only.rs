//! nccl-tests flags that act on NCCL itself (-x, -M, -D, -V): what the
//! CPU and MPI backends do with them. Accepted, as a drop-in must, and
//! said once on stderr where they change nothing; a device-API
//! implementation, which cannot run without NCCL, is refused.

use crate::backend_open::Tuning;
use crate::exit::Failure;

/// nccl-tests' -V range warning (its words), when `count` is outside it.
pub fn cta_count_warning(count: i32) -> Option<String> {
    (count <= 0 || count > 128).then(|| {
        format!(
            "device_cta_count (-V) must be positive and less than 128, got {count}. Using default value 16."
        )
    })
}

/// The lines for `backend` (`cpu`, `mpi`): notes printed, or the one
/// usage error.
pub fn elsewhere(t: &Tuning, backend: &str) -> Result<(), Failure> {
    for line in notes(t, backend)? {
        crate::stdout::say(&line);
    }
    Ok(())
}

fn notes(t: &Tuning, backend: &str) -> Result<Vec<String>, Failure> {
    if let Some(d) = t.device_implementation.filter(|&d| d != 0) {
        return Err(Failure::usage(format!(
            "-D {d} (device_implementation) runs collectives through NCCL's device API, which the {backend} backend does not have: use --backend nccl, or -D 0"
        )));
    }
    let mut lines = Vec::new();
    if let Some(w) = t.device_cta_count.and_then(cta_count_warning) {
        lines.push(w);
    }
    if t.cta_policy.is_some() {
        lines.push(format!(
            "collbench: -x/--cta_policy sets an NCCL communicator option: it applies to the NCCL backend only (ignored on the {backend} backend)"
        ));
    }
    if t.memory {
        lines.push(format!(
            "collbench: -M/--memory reports GPU memory: it applies to the NCCL backend only (no report on the {backend} backend)"
        ));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_flags_on_the_cpu_backend() {
        let none = Tuning::default();
        assert!(notes(&none, "cpu").unwrap().is_empty());
        let d0 = Tuning {
            device_implementation: Some(0),
            device_cta_count: Some(16),
            ..Tuning::default()
        };
        assert!(notes(&d0, "cpu").unwrap().is_empty());
        let d1 = Tuning {
            device_implementation: Some(1),
            ..Tuning::default()
        };
        let e = notes(&d1, "cpu").unwrap_err().message;
        assert!(e.contains("use --backend nccl, or -D 0"), "{e}");
        let x = Tuning {
            cta_policy: Some(1),
            memory: true,
            device_cta_count: Some(200),
            ..Tuning::default()
        };
        let lines = notes(&x, "cpu").unwrap();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0],
            "device_cta_count (-V) must be positive and less than 128, got 200. Using default value 16."
        );
        assert!(lines[1].contains("NCCL backend only"));
        assert!(lines[2].starts_with("collbench: -M/--memory"));
    }

    #[test]
    fn cta_count_range_is_nccl_tests() {
        assert!(cta_count_warning(1).is_none());
        assert!(cta_count_warning(128).is_none());
        assert!(cta_count_warning(0).is_some());
        assert!(cta_count_warning(129).is_some());
    }
}
