//! NCCL_TESTS_SPLIT / NCCL_TESTS_SPLIT_MASK: run parallel groups of ranks,
//! each with its own communicator, exactly as nccl-tests defines them.
//!
//! - `NCCL_TESTS_SPLIT_MASK=<hex>` (read by `strtoul(.., 16)`, so `0x7` and
//!   `7` are the same): color = `rank & mask`. It wins over the other.
//! - `NCCL_TESTS_SPLIT="<OP> <int>"`: OP is `AND`/`&`, `OR`/`|`, `MOD`/`%`
//!   or `DIV`//`/` (case-insensitive, at the start of the value; the space is
//!   optional); the int is `0b...` binary or C `strtoul` base 0 (`0x` hex,
//!   leading `0` octal, else decimal). Color = `rank OP int`.
//! - Anything else (unknown OP, no number): color 0, one group.
//!
//! Like nccl-tests, the operand is truncated to a C `int`. Where nccl-tests
//! would divide by zero (`MOD 0`, `DIV 0`) or produce a negative color (a
//! negative operand), this gives 0.

/// The split color of the process with rank `process_rank`; ranks with the
/// same color form one communicator.
pub fn split_color(process_rank: usize, env: impl Fn(&str) -> Option<String>) -> u64 {
    if let Some(mask) = env("NCCL_TESTS_SPLIT_MASK") {
        let (mask, _) = strtoul(&mask, 16);
        return process_rank as u64 & mask;
    }
    let Some(expr) = env("NCCL_TESTS_SPLIT") else {
        return 0;
    };
    let rank = process_rank as i64;
    // Each operator's spellings and what it does (None: undefined in C).
    type Apply = fn(i64, i64) -> Option<i64>;
    let ops: [(&[&str], Apply); 4] = [
        (&["AND", "&"], |r, c| Some(r & c)),
        (&["OR", "|"], |r, c| Some(r | c)),
        (&["MOD", "%"], |r, c| (c != 0).then(|| r % c)),
        (&["DIV", "/"], |r, c| (c != 0).then(|| r / c)),
    ];
    for (names, apply) in ops {
        for name in names {
            let Some(rest) = strip_prefix_ignore_case(&expr, name) else {
                continue;
            };
            return match parse_int(rest) {
                // C: `(int)strtoul(...)` keeps the low 32 bits, signed.
                Some(value) => {
                    apply(rank, i64::from(value as u32 as i32)).map_or(0, |c| c.max(0) as u64)
                }
                None => 0,
            };
        }
    }
    0
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// nccl-tests' `parseInt`: skip blanks; `0b` then binary; else strtoul base
/// 0. `None` when nothing was read.
fn parse_int(text: &str) -> Option<u64> {
    let text = text.trim_start_matches(is_c_space);
    if text.is_empty() {
        return None;
    }
    if strip_prefix_ignore_case(text, "0b").is_some() {
        // nccl-tests counts "0b" alone as read (value 0).
        return Some(strtoul(&text[2..], 2).0);
    }
    match strtoul(text, 0) {
        (_, 0) => None,
        (value, _) => Some(value),
    }
}

fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

/// C `strtoul` on a 64-bit `unsigned long`: returns the value and how many
/// bytes were consumed (0: no number). Base 0 picks 16/8/10 from the prefix;
/// base 16 accepts an optional `0x`. Overflow gives `u64::MAX`; a leading
/// `-` negates (wrapping), as C does.
fn strtoul(text: &str, base: u32) -> (u64, usize) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() && is_c_space(bytes[i] as char) {
        i += 1;
    }
    let negative = match bytes.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let has_hex_prefix = |i: usize| {
        bytes.get(i) == Some(&b'0')
            && matches!(bytes.get(i + 1), Some(b'x' | b'X'))
            && bytes.get(i + 2).is_some_and(|b| b.is_ascii_hexdigit())
    };
    let base = match base {
        0 if has_hex_prefix(i) => {
            i += 2;
            16
        }
        0 if bytes.get(i) == Some(&b'0') => 8,
        0 => 10,
        16 if has_hex_prefix(i) => {
            i += 2;
            16
        }
        b => b,
    };
    let start = i;
    let mut value: u64 = 0;
    let mut overflow = false;
    while let Some(d) = bytes.get(i).and_then(|&b| (b as char).to_digit(base)) {
        match value
            .checked_mul(u64::from(base))
            .and_then(|v| v.checked_add(u64::from(d)))
        {
            Some(v) => value = v,
            None => overflow = true,
        }
        i += 1;
    }
    if i == start {
        return (0, 0);
    }
    let value = if overflow {
        u64::MAX
    } else if negative {
        value.wrapping_neg()
    } else {
        value
    };
    (value, i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn color(rank: usize, vars: &[(&str, &str)]) -> u64 {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        split_color(rank, |k| {
            vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn no_variables_one_group() {
        assert_eq!(color(7, &[]), 0);
    }

    #[test]
    fn mask_is_hex_with_or_without_prefix() {
        assert_eq!(color(7, &[("NCCL_TESTS_SPLIT_MASK", "0x3")]), 3);
        assert_eq!(color(13, &[("NCCL_TESTS_SPLIT_MASK", "7")]), 5);
        assert_eq!(
            color(0x1f, &[("NCCL_TESTS_SPLIT_MASK", "10")]),
            0x10,
            "10 is hex 16, not decimal ten"
        );
        assert_eq!(color(5, &[("NCCL_TESTS_SPLIT_MASK", "junk")]), 0);
    }

    #[test]
    fn mask_wins_over_split() {
        assert_eq!(
            color(
                6,
                &[
                    ("NCCL_TESTS_SPLIT_MASK", "0x1"),
                    ("NCCL_TESTS_SPLIT", "DIV 2")
                ]
            ),
            0
        );
    }

    #[test]
    fn operators_by_word_and_symbol() {
        assert_eq!(color(13, &[("NCCL_TESTS_SPLIT", "AND 0x3")]), 1);
        assert_eq!(color(13, &[("NCCL_TESTS_SPLIT", "&3")]), 1);
        assert_eq!(color(4, &[("NCCL_TESTS_SPLIT", "or 1")]), 5);
        assert_eq!(color(4, &[("NCCL_TESTS_SPLIT", "| 0b10")]), 6);
        assert_eq!(color(13, &[("NCCL_TESTS_SPLIT", "Mod 4")]), 1);
        assert_eq!(color(13, &[("NCCL_TESTS_SPLIT", "% 4")]), 1);
        assert_eq!(color(13, &[("NCCL_TESTS_SPLIT", "div 4")]), 3);
        assert_eq!(color(13, &[("NCCL_TESTS_SPLIT", "/8")]), 1);
    }

    #[test]
    fn numbers_follow_c_rules() {
        assert_eq!(
            color(100, &[("NCCL_TESTS_SPLIT", "MOD 010")]),
            4,
            "leading 0 is octal 8"
        );
        assert_eq!(color(100, &[("NCCL_TESTS_SPLIT", "MOD 0x10")]), 4);
        assert_eq!(color(100, &[("NCCL_TESTS_SPLIT", "MOD 0B111")]), 2);
        assert_eq!(
            color(100, &[("NCCL_TESTS_SPLIT", "MOD 9z")]),
            1,
            "trailing junk ignored"
        );
        assert_eq!(
            color(9, &[("NCCL_TESTS_SPLIT", "AND -1")]),
            9,
            "-1 is all ones"
        );
    }

    #[test]
    fn unknown_or_broken_expressions_give_zero() {
        for expr in ["XOR 1", "AND", "AND x", "", "MOD 0", "DIV 0", " AND 1"] {
            assert_eq!(color(7, &[("NCCL_TESTS_SPLIT", expr)]), 0, "{expr:?}");
        }
    }

    #[test]
    fn strtoul_edge_cases() {
        assert_eq!(strtoul("0x", 0), (0, 1), "0 then junk x");
        assert_eq!(strtoul("  +42", 10), (42, 5));
        assert_eq!(strtoul("99999999999999999999999", 10).0, u64::MAX);
        assert_eq!(strtoul("ff", 16), (255, 2));
        assert_eq!(strtoul("0XfF", 16), (255, 4));
    }
}
