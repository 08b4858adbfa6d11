//! Slurm hostlist expressions: `gpu-[01-04,07],login1` names gpu-01, gpu-02,
//! gpu-03, gpu-04, gpu-07 and login1, in that order.
//!
//! Grammar (as Slurm's own `hostlist.c`): a comma-separated list (commas
//! inside brackets do not separate) of names; each name may hold several
//! bracket groups (`r[1-2]n[1-2]` is their product, leftmost varying
//! slowest); a group is a comma list of `N` or `LO-HI`, and the digits of
//! `LO` set the zero padding (`[08-10]` gives 08, 09, 10).

/// Most names one expression may expand to: guards against `n[0-99999999]`
/// eating the memory of every rank.
pub const MAX_HOSTS: usize = 1 << 20;

/// Why a hostlist expression could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad hostlist `{expr}`: {problem}")]
pub struct HostlistError {
    /// The whole expression.
    pub expr: String,
    /// What is wrong with it.
    pub problem: String,
}

/// Expands a hostlist expression into host names, in order.
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    let err = |problem: String| HostlistError {
        expr: expr.to_string(),
        problem,
    };
    let mut hosts = Vec::new();
    for item in split_top_level(expr).map_err(err)? {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        expand_item(item, &mut hosts).map_err(err)?;
    }
    Ok(hosts)
}

/// The first host of an expression (rank 0's host under Slurm's default
/// block distribution).
pub fn first(expr: &str) -> Result<String, HostlistError> {
    // Expanding everything keeps one code path; MAX_HOSTS bounds the cost.
    expand(expr)?
        .into_iter()
        .next()
        .ok_or_else(|| HostlistError {
            expr: expr.to_string(),
            problem: "it names no host".into(),
        })
}

/// Splits on commas that are outside brackets.
fn split_top_level(expr: &str) -> Result<Vec<&str>, String> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in expr.char_indices() {
        match c {
            '[' if depth > 0 => return Err("nested `[`".into()),
            '[' => depth = 1,
            ']' if depth == 0 => return Err(format!("`]` without `[` at byte {i}")),
            ']' => depth = 0,
            ',' if depth == 0 => {
                items.push(&expr[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err("`[` without `]`".into());
    }
    items.push(&expr[start..]);
    Ok(items)
}

/// Expands one name with zero or more bracket groups, appending to `out`.
fn expand_item(item: &str, out: &mut Vec<String>) -> Result<(), String> {
    let mut names = vec![String::new()];
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        let close = rest[open..]
            .find(']')
            .map(|c| open + c)
            .ok_or("`[` without `]`")?;
        let literal = &rest[..open];
        let values = expand_group(&rest[open + 1..close])?;
        if names.len().saturating_mul(values.len()) + out.len() > MAX_HOSTS {
            return Err(format!("it names more than {MAX_HOSTS} hosts"));
        }
        names = names
            .iter()
            .flat_map(|n| values.iter().map(move |v| format!("{n}{literal}{v}")))
            .collect();
        rest = &rest[close + 1..];
    }
    out.extend(names.into_iter().map(|n| n + rest));
    Ok(())
}

/// Expands the inside of one bracket group: `01-04,07`.
fn expand_group(group: &str) -> Result<Vec<String>, String> {
    let mut values = Vec::new();
    for part in group.split(',') {
        let part = part.trim();
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let bad = || format!("`{part}` is not a number or a LO-HI range");
        if lo.is_empty() || !lo.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        if hi.is_empty() || !hi.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let lo_n: u64 = lo.parse().map_err(|_| bad())?;
        let hi_n: u64 = hi.parse().map_err(|_| bad())?;
        if hi_n < lo_n {
            return Err(format!("range `{part}` goes down"));
        }
        if hi_n - lo_n >= (MAX_HOSTS - values.len().min(MAX_HOSTS)) as u64 {
            return Err(format!("it names more than {MAX_HOSTS} hosts"));
        }
        let width = lo.len();
        values.extend((lo_n..=hi_n).map(|n| format!("{n:0width$}")));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ex(s: &str) -> Vec<String> {
        expand(s).unwrap()
    }

    #[test]
    fn plain_names_and_lists() {
        assert_eq!(ex("login1"), ["login1"]);
        assert_eq!(ex("a,b , c"), ["a", "b", "c"]);
        assert_eq!(ex("n[1-2]"), ["n1", "n2"]);
    }

    #[test]
    fn ranges_keep_zero_padding_and_order() {
        assert_eq!(
            ex("gpu-[01-04,07],login1"),
            ["gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-07", "login1"]
        );
        assert_eq!(ex("n[08-10]"), ["n08", "n09", "n10"]);
        assert_eq!(ex("n[8-10]"), ["n8", "n9", "n10"]);
        assert_eq!(ex("n[007]"), ["n007"]);
    }

    #[test]
    fn suffixes_and_several_groups() {
        assert_eq!(ex("n[1-2]-ib"), ["n1-ib", "n2-ib"]);
        assert_eq!(ex("r[1-2]n[3,5]"), ["r1n3", "r1n5", "r2n3", "r2n5"]);
        assert_eq!(ex("a[1-2],b[3]c"), ["a1", "a2", "b3c"]);
    }

    #[test]
    fn first_host() {
        assert_eq!(first("gpu-[01-04,07],login1").unwrap(), "gpu-01");
        assert_eq!(first("login1,gpu-[01-04]").unwrap(), "login1");
        assert!(first("").is_err());
    }

    #[test]
    fn malformed_expressions_are_errors_naming_the_problem() {
        for bad in [
            "n[1-2",
            "n1-2]",
            "n[[1]]",
            "n[a-b]",
            "n[3-1]",
            "n[]",
            "n[1-]",
            "n[0-99999999]",
        ] {
            let e = expand(bad).unwrap_err();
            assert!(e.to_string().contains(bad), "{e}");
        }
    }

    proptest! {
        /// Any list of padded ranges expands to exactly the numbers, padded.
        #[test]
        fn ranges_expand_to_each_number(prefix in "[a-z]{1,5}-?", lo in 0u32..500, len in 0u32..40, width in 1usize..5) {
            let hi = lo + len;
            let expr = format!("{prefix}[{lo:0width$}-{hi}]");
            let got = expand(&expr).unwrap();
            let want: Vec<String> = (lo..=hi).map(|n| format!("{prefix}{n:0width$}")).collect();
            prop_assert_eq!(got, want);
        }

        /// Comma lists of plain names come back unchanged.
        #[test]
        fn plain_lists_round_trip(names in proptest::collection::vec("[a-z][a-z0-9-]{0,8}", 1..8)) {
            prop_assert_eq!(expand(&names.join(",")).unwrap(), names);
        }

        /// No input panics.
        #[test]
        fn never_panics(s in "[a-z0-9\\[\\],-]{0,30}") {
            let _ = expand(&s);
        }
    }
}
