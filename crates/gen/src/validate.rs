//! Input checks. Each failure is one line that names the flag, the value and
//! the rule, so a user can fix it without reading the source.
//!
//! Values are shown with `{:?}` so that a newline or other control character in
//! them cannot split the message or hide what was refused.

use crate::error::{Error, Result};

/// The RFC 1123 label rule, as Kubernetes states it for names.
const RFC1123_RULE: &str = "must be an RFC 1123 label: lower-case letters, digits and '-', \
     starting and ending with a letter or digit, at most 63 characters";

/// Checks a Kubernetes object name, namespace or queue name.
pub fn rfc1123_label(flag: &str, value: &str) -> Result<()> {
    let ok = !value.is_empty()
        && value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if !ok {
        return Err(Error::Invalid(format!(
            "invalid {flag} {value:?}: {RFC1123_RULE}"
        )));
    }
    Ok(())
}

/// Checks a count that must be at least 1 (nodes, GPUs per node, slots).
pub fn positive(flag: &str, value: u32) -> Result<()> {
    if value == 0 {
        return Err(Error::Invalid(format!(
            "invalid {flag} 0: must be at least 1"
        )));
    }
    Ok(())
}

/// Checks a TCP port rank 0 listens on: 0 would let the system pick one
/// the other ranks cannot know.
pub fn port(flag: &str, value: u16) -> Result<()> {
    if value == 0 {
        return Err(Error::Invalid(format!(
            "invalid {flag} 0: give a fixed TCP port from 1 to 65535 (default {})",
            crate::DEFAULT_RENDEZVOUS_PORT
        )));
    }
    Ok(())
}

/// Checks a Slurm time limit in one of sbatch's forms: MM, MM:SS, HH:MM:SS,
/// D-HH, D-HH:MM, D-HH:MM:SS, or UNLIMITED/INFINITE.
pub fn slurm_time(flag: &str, value: &str) -> Result<()> {
    let numbers = |s: &str, most: usize| {
        let parts: Vec<&str> = s.split(':').collect();
        parts.len() <= most
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    };
    let ok = value.eq_ignore_ascii_case("unlimited")
        || value.eq_ignore_ascii_case("infinite")
        || match value.split_once('-') {
            Some((days, rest)) => numbers(days, 1) && numbers(rest, 3),
            None => numbers(value, 3),
        };
    if !ok {
        return Err(Error::Invalid(format!(
            "invalid {flag} {value:?}: use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. 00:30:00)"
        )));
    }
    let max = collbench_core::bounds::MAX_SECONDS;
    if slurm_seconds(value).is_none_or(|s| s > max) {
        return Err(Error::Invalid(format!(
            "invalid {flag} {value}: more than a year ({} days), which sbatch refuses at submission: give a shorter limit, or UNLIMITED",
            max / 86_400
        )));
    }
    Ok(())
}

/// The seconds of a time limit of sbatch's forms (checked by
/// [`slurm_time`]); `Some(0)` for UNLIMITED, `None` past u64.
fn slurm_seconds(value: &str) -> Option<u64> {
    if value.eq_ignore_ascii_case("unlimited") || value.eq_ignore_ascii_case("infinite") {
        return Some(0);
    }
    let (days, rest) = match value.split_once('-') {
        Some((d, r)) => (Some(d.parse::<u64>().ok()?), r),
        None => (None, value),
    };
    let parts: Vec<u64> = rest
        .split(':')
        .map(|p| p.parse::<u64>().ok())
        .collect::<Option<_>>()?;
    // Without days: M, M:S, H:M:S; with days: D-H, D-H:M, D-H:M:S.
    let scales: &[u64] = match (days.is_some(), parts.len()) {
        (false, 1) => &[60],
        (false, 2) => &[60, 1],
        (false, _) => &[3600, 60, 1],
        (true, 1) => &[3600],
        (true, 2) => &[3600, 60],
        (true, _) => &[3600, 60, 1],
    };
    let mut total = days.unwrap_or(0).checked_mul(86_400)?;
    for (n, scale) in parts.iter().zip(scales) {
        total = total.checked_add(n.checked_mul(*scale)?)?;
    }
    Some(total)
}

/// Whether `name` is a C identifier, the only portable environment name.
fn is_c_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Parses one `--env K=V`; K must be a C identifier, V may be anything
/// (it is quoted wherever it is written).
pub fn env_var(entry: &str) -> Result<(String, String)> {
    let Some((name, value)) = entry.split_once('=') else {
        return Err(Error::Invalid(format!(
            "invalid --env {entry:?}: expected NAME=VALUE"
        )));
    };
    if !is_c_identifier(name) {
        return Err(Error::Invalid(format!(
            "invalid --env {entry:?}: the name {name:?} must be a C identifier \
             (letters, digits and '_', not starting with a digit)"
        )));
    }
    if value.contains('\0') {
        return Err(Error::Invalid(format!(
            "invalid --env {entry:?}: the value contains a NUL byte"
        )));
    }
    Ok((name.to_string(), value.to_string()))
}

/// Parses every `--env` entry, keeping their order.
pub fn env_vars(entries: &[String]) -> Result<Vec<(String, String)>> {
    entries.iter().map(|e| env_var(e)).collect()
}

/// Checks a Kubernetes extended-resource name such as `nvidia.com/gpu`,
/// `rdma/ib` or `vpc.amazonaws.com/efa`: an optional DNS-subdomain prefix and
/// '/', then a name of letters, digits, '-', '_' and '.', alphanumeric at both
/// ends, at most 63 characters.
pub fn resource_name(flag: &str, value: &str) -> Result<()> {
    if !qualified_name(value) {
        return Err(Error::Invalid(format!(
            "invalid {flag} {value:?}: must be a Kubernetes resource name such as \
             nvidia.com/gpu (optional lower-case DNS prefix and '/', then letters, digits, \
             '-', '_' or '.', alphanumeric at both ends, at most 63 characters)"
        )));
    }
    Ok(())
}

/// Checks a node label key such as `kubernetes.io/hostname` or
/// `cloud.google.com/gce-topology-block` (the same grammar as a resource
/// name: Kubernetes calls both qualified names).
pub fn label_key(flag: &str, value: &str) -> Result<()> {
    if !qualified_name(value) {
        return Err(Error::Invalid(format!(
            "invalid {flag} {value:?}: must be a node label key such as \
             kubernetes.io/hostname or cloud.google.com/gce-topology-block"
        )));
    }
    Ok(())
}

/// Kubernetes' qualified name: an optional DNS-subdomain prefix and '/',
/// then a name of letters, digits, '-', '_' and '.', alphanumeric at both
/// ends, at most 63 characters.
fn qualified_name(value: &str) -> bool {
    let (prefix, name) = match value.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, value),
    };
    let alnum_ends = |s: &str| {
        s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
    };
    let name_ok = name.len() <= 63
        && alnum_ends(name)
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    let prefix_ok = match prefix {
        None => true,
        Some(p) => {
            p.len() <= 253
                && p.split('.').all(|label| {
                    alnum_ends(label)
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                })
        }
    };
    name_ok && prefix_ok
}

/// Parses one `--resource NAME=COUNT` (COUNT a whole number >= 1).
pub fn resource(entry: &str) -> Result<(String, u32)> {
    let Some((name, count)) = entry.split_once('=') else {
        return Err(Error::Invalid(format!(
            "invalid --resource {entry:?}: expected NAME=COUNT, e.g. rdma/ib=1"
        )));
    };
    resource_name("--resource", name)?;
    match count.parse::<u32>() {
        Ok(n) if n >= 1 => Ok((name.to_string(), n)),
        _ => Err(Error::Invalid(format!(
            "invalid --resource {entry:?}: COUNT must be a whole number >= 1"
        ))),
    }
}

/// Whether `host` is a plain host name or IPv4 address (letters, digits, '-',
/// '.', '_'), which is all `-H` and a rendezvous address need.
fn is_host_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && !host.starts_with('-')
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
}

/// Parses `--hosts h1:8,h2:8` into (host, slots) pairs.
pub fn hosts(list: &str) -> Result<Vec<(String, u32)>> {
    let mut out = Vec::new();
    for entry in list.split(',') {
        let parsed = entry
            .split_once(':')
            .and_then(|(h, n)| Some((h, n.parse::<u32>().ok()?)));
        match parsed {
            Some((host, slots)) if is_host_name(host) && slots >= 1 => {
                out.push((host.to_string(), slots))
            }
            _ => {
                return Err(Error::Invalid(format!(
                    "invalid --hosts entry {entry:?}: expected HOST:SLOTS with a host name \
                 (letters, digits, '-', '.', '_') and SLOTS a whole number >= 1, e.g. h1:8,h2:8"
                )))
            }
        }
    }
    Ok(out)
}

/// Checks a value written on an `#SBATCH` line. sbatch parses those lines
/// itself, not through the shell, so quoting does not apply; refuse anything
/// but a conservative character set instead.
pub fn sbatch_value(flag: &str, value: &str) -> Result<()> {
    let ok = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:,+".contains(&b));
    if !ok {
        return Err(Error::Invalid(format!(
            "invalid {flag} {value:?}: #SBATCH values may only hold letters, digits \
             and '-', '_', '.', ':', ',', '+'"
        )));
    }
    Ok(())
}

/// Checks a container image reference: non-empty, no whitespace or control
/// characters (which no registry allows and which would only hide mistakes).
pub fn image(flag: &str, value: &str) -> Result<()> {
    if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::Invalid(format!(
            "invalid {flag} {value:?}: must be an image reference without spaces"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1123_accepts_and_refuses() {
        for ok in ["collbench", "a", "nccl-all-2", &"a".repeat(63)] {
            rfc1123_label("--name", ok).unwrap();
        }
        for bad in [
            "",
            "Collbench",
            "-a",
            "a-",
            "a_b",
            "a.b",
            "a b",
            &"a".repeat(64),
        ] {
            let err = rfc1123_label("--name", bad).unwrap_err().to_string();
            assert!(err.contains("RFC 1123"), "{err}");
        }
    }

    #[test]
    fn env_entries() {
        assert_eq!(
            env_var("NCCL_IB_HCA==mlx5_1:1").unwrap(),
            ("NCCL_IB_HCA".into(), "=mlx5_1:1".into())
        );
        assert_eq!(env_var("A=").unwrap(), ("A".into(), "".into()));
        for bad in ["NOEQUALS", "=x", "1A=x", "A-B=x", "A B=x", "$(x)=1"] {
            assert!(env_var(bad).is_err(), "{bad}");
        }
        let err = env_var("A-B=x").unwrap_err().to_string();
        assert!(
            err.contains("\"A-B\"") && err.contains("C identifier"),
            "{err}"
        );
    }

    #[test]
    fn resources() {
        assert_eq!(resource("rdma/ib=1").unwrap(), ("rdma/ib".into(), 1));
        assert_eq!(
            resource("vpc.amazonaws.com/efa=4").unwrap(),
            ("vpc.amazonaws.com/efa".into(), 4)
        );
        for bad in [
            "rdma/ib",
            "rdma/ib=0",
            "rdma/ib=x",
            "Bad Name=1",
            "a/b/c=1",
            "=1",
        ] {
            assert!(resource(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn host_lists() {
        assert_eq!(
            hosts("h1:8,10.0.0.2:4").unwrap(),
            vec![("h1".into(), 8), ("10.0.0.2".into(), 4)]
        );
        for bad in [
            "h1", "h1:0", "h1:x", ":8", "h1:8,", "h 1:8", "-h:8", "$(x):8",
        ] {
            let err = hosts(bad).unwrap_err().to_string();
            assert!(err.contains("HOST:SLOTS"), "{bad}: {err}");
        }
    }

    #[test]
    fn sbatch_values() {
        sbatch_value("--time", "1-00:00:00").unwrap();
        for ok in [
            "30",
            "30:00",
            "00:30:00",
            "1-00",
            "1-00:00",
            "1-00:00:00",
            "UNLIMITED",
        ] {
            slurm_time("--time", ok).unwrap();
        }
        for bad in ["soon", "", "1:2:3:4", "-1", "1-", "a-00"] {
            assert!(slurm_time("--time", bad).is_err(), "{bad}");
        }
        // More than a year (or past u64) is one line, not a script sbatch refuses.
        assert_eq!(slurm_seconds("1-02:03:04"), Some(93_784));
        assert_eq!(slurm_seconds("90"), Some(5_400));
        slurm_time("--time", "365-00").unwrap();
        for big in [
            "366-00",
            "99999999999999999999",
            "525601",
            "18446744073709551615-00",
        ] {
            let e = slurm_time("--time", big).unwrap_err().to_string();
            assert!(e.contains("more than a year"), "{big}: {e}");
        }
        assert!(port("--port", 0).is_err());
        port("--port", 1).unwrap();
        sbatch_value("--partition", "gpu,debug").unwrap();
        for bad in ["", "a b", "a\nb", "x'y", "$(x)"] {
            assert!(sbatch_value("--partition", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn counts() {
        positive("--nodes", 1).unwrap();
        assert_eq!(
            positive("--nodes", 0).unwrap_err().to_string(),
            "invalid --nodes 0: must be at least 1"
        );
    }
}
