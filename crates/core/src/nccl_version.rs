//! NCCL's version code (`22803`, as `ncclGetVersion` returns it and
//! nccl-tests prints it) and its text (`2.28.3`), both ways, in one place.

/// The text of NCCL's version code: `22803` -> `2.28.3`, and the older
/// scheme of NCCL before 2.9, `2708` -> `2.7.8`.
pub fn text(code: u64) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100)
    }
}

/// The version code of a record's library (`NCCL 2.28.3` -> `22803`); 0
/// when there is none or it is not NCCL.
pub fn code_of_library(library: Option<&str>) -> u64 {
    let Some(v) = library.and_then(|l| l.strip_prefix("NCCL ")) else {
        return 0;
    };
    let mut it = v
        .split(['.', ' ', '+', '-'])
        .map(|p| p.parse::<u64>().unwrap_or(0));
    let (a, b, c) = (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    );
    a * 10000 + b * 100 + c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_decode_in_both_schemes_and_round_trip() {
        assert_eq!(text(22803), "2.28.3");
        assert_eq!(text(2708), "2.7.8");
        assert_eq!(code_of_library(Some("NCCL 2.28.3")), 22803);
        assert_eq!(
            code_of_library(Some(&format!("NCCL {}", text(22803)))),
            22803
        );
        assert_eq!(code_of_library(None), 0);
        assert_eq!(code_of_library(Some("Open MPI 4.1")), 0);
    }
}
