//! POSIX shell quoting: any string becomes one literal word for sh/bash.

use std::borrow::Cow;

/// Characters that are never special to a POSIX shell anywhere in a word.
/// Everything else (spaces, quotes, `$`, backquote, `\`, globs, `~`, `#`,
/// `;`, `&`, `|`, `<`, `>`, parentheses, newlines ...) forces quoting.
fn is_plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c)
}

/// Quotes `s` so that a POSIX shell reads it back as exactly `s`.
///
/// Plain words are returned as they are, to keep scripts readable; anything
/// else is wrapped in single quotes, inside which nothing is special, and each
/// `'` is written as `'\''` (close, escaped quote, reopen).
pub fn sh_quote(s: &str) -> Cow<'_, str> {
    if !s.is_empty() && s.chars().all(is_plain) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    Cow::Owned(out)
}

/// Quotes a word that stands in command position. A plain `A=B` there would be
/// read as a variable assignment, not as the program to run, so it is quoted.
pub fn sh_quote_command(s: &str) -> Cow<'_, str> {
    if s.contains('=') {
        Cow::Owned(format!("'{}'", s.replace('\'', "'\\''")))
    } else {
        sh_quote(s)
    }
}

/// Quotes each word and joins them with single spaces.
pub fn sh_join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| sh_quote(w.as_ref()).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_stay_readable() {
        assert_eq!(
            sh_quote("NCCL_IB_HCA=mlx5_1:1,mlx5_2:1"),
            "NCCL_IB_HCA=mlx5_1:1,mlx5_2:1"
        );
        assert_eq!(
            sh_quote("/opt/collbench/bin/collbench"),
            "/opt/collbench/bin/collbench"
        );
        assert_eq!(sh_quote("8G"), "8G");
    }

    #[test]
    fn special_words_are_single_quoted() {
        assert_eq!(sh_quote(""), "''");
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("$(x)"), "'$(x)'");
        assert_eq!(sh_quote("a'; exit 97 #"), "'a'\\''; exit 97 #'");
        assert_eq!(sh_quote("~root"), "'~root'");
        assert_eq!(sh_quote("x\ny"), "'x\ny'");
    }

    #[test]
    fn assignment_in_command_position_is_quoted() {
        assert_eq!(sh_quote_command("A=B"), "'A=B'");
        assert_eq!(sh_quote_command("collbench"), "collbench");
    }

    #[test]
    fn shell_reads_quoted_words_back_exactly() {
        let words = [
            "a'; exit 97 #",
            "$(x)",
            "`id`",
            "\"dq\" \\ back",
            "",
            "*",
            "tab\there",
            "line\nbreak",
            "'",
            "''",
            "ünïcode",
        ];
        let script = format!("printf '%s\\0' {}", sh_join(&words));
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "{script}");
        let got: Vec<&str> = std::str::from_utf8(&out.stdout)
            .unwrap()
            .split_terminator('\0')
            .collect();
        assert_eq!(got, words);
    }
}
