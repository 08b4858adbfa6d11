//! `--require-transport`: the path NCCL must take, checked against what
//! NCCL reported it took (`Record::nccl_path`), and the `# NCCL path:`
//! line a text run prints after nccl-tests' own footer.

use crate::exit::{Failure, Outcome};
use collbench_core::nccl_path::gate::{self, Required};
use collbench_core::Record;

/// The transports a run requires, as `--require-transport ib,p2p` names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequiredTransports(pub Vec<Required>);

/// What a `--require-transport` flag asks for (nothing without it).
pub fn required(flag: Option<&RequiredTransports>) -> &[Required] {
    flag.map_or(&[], |r| r.0.as_slice())
}

/// clap's parser for `--require-transport`: names separated by commas.
pub fn parse(s: &str) -> Result<RequiredTransports, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let r = Required::parse(part).map_err(|e| e.to_string())?;
        if !out.contains(&r) {
            out.push(r);
        }
    }
    if out.is_empty() {
        return Err("names no transport (e.g. --require-transport ib,p2p)".into());
    }
    Ok(RequiredTransports(out))
}

/// Before anything runs: only NCCL has a path to check.
pub fn refuse_without_nccl(required: &[Required], backend: &str) -> Result<(), Failure> {
    if required.is_empty() || backend == "nccl" {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "--require-transport checks the path NCCL took, and the {backend} backend does not use NCCL: run with --backend nccl, or drop the flag"
    )))
}

/// After the run, on the process that holds the record: one line per
/// requirement not met, or the reason the path is unknown.
pub fn judge(record: &Record, required: &[Required]) -> Result<(), Failure> {
    if required.is_empty() {
        return Ok(());
    }
    let Some(path) = &record.nccl_path else {
        let why = collbench_nccl::path_capture::read()
            .err()
            .unwrap_or_else(|| "NCCL printed no path".into());
        return Err(Failure::new(
            Outcome::TransportMismatch,
            format!("transport: cannot tell the path NCCL took ({why}), so --require-transport cannot pass"),
        ));
    };
    let failures = gate::require(path, required, &record.env);
    if failures.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = failures.iter().map(ToString::to_string).collect();
    Err(Failure::new(Outcome::TransportMismatch, lines.join("\n")))
}

/// `# NCCL path: NET/Socket (no GDRDMA); P2P/CUMEM` after the last
/// footer, when NCCL's path is known.
pub fn text_line(record: &Record) -> Option<String> {
    let path = record.nccl_path.as_ref()?;
    Some(format!("# NCCL path: {}\n", path.summary()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::nccl_path::NcclPath;

    #[test]
    fn names_are_parsed_once_and_unknown_ones_listed() {
        assert_eq!(
            parse("ib, p2p,ib").unwrap().0,
            [Required::Ib, Required::P2p]
        );
        let e = parse("ib,nvlink").unwrap_err();
        assert!(e.contains("unknown transport 'nvlink'"), "{e}");
        assert!(parse(",").is_err());
    }

    #[test]
    fn the_cpu_backend_is_refused_before_anything_runs() {
        let e = refuse_without_nccl(&[Required::Ib], "cpu").unwrap_err();
        assert_eq!(e.outcome, Outcome::Usage);
        assert!(e.message.contains("--backend nccl"), "{}", e.message);
        assert!(refuse_without_nccl(&[], "cpu").is_ok());
        assert!(refuse_without_nccl(&[Required::Ib], "nccl").is_ok());
    }

    #[test]
    fn a_socket_run_fails_an_ib_requirement_naming_the_cause() {
        let mut r = Record::new("collbench");
        r.nccl_path = NcclPath::from_text(
            "h:1:1 [0] NCCL INFO Using network Socket\nh:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n",
        );
        r.env.insert("NCCL_IB_DISABLE".into(), "1".into());
        let e = judge(&r, &[Required::Ib]).unwrap_err();
        assert_eq!(e.outcome, Outcome::TransportMismatch);
        assert_eq!(
            e.message,
            "transport: expected NET/IB (required), NCCL used NET/Socket; cause: NCCL_IB_DISABLE=1"
        );
        assert!(judge(&r, &[Required::Socket]).is_ok());
        assert_eq!(
            text_line(&r).unwrap(),
            "# NCCL path: NET/Socket (no GDRDMA)\n"
        );
    }
}
