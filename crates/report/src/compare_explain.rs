//! What `collbench compare` says about NCCL's choices: when both runs
//! carry an explanation (collbench JSON of NCCL runs, see docs/explain.md)
//! and the algorithm, protocol or channel count differ, the per-case table
//! gets a column naming the change, and every regression gets a line such
//! as `all_reduce float sum 64 MiB out-of-place: busbw -12.0%, NCCL used
//! RING/SIMPLE before and TREE/LL128 now`. Where either side has no
//! explanation (logs of other tools, CPU runs, NCCL could not say) nothing
//! is claimed. The two questions a comparison asks of NCCL's choices are
//! functions over a borrowed [`Comparison`]: its methods stay with its
//! rows (`compare/`).

use crate::compare::{Comparison, Row};
use collbench_core::{Explanation, Placement};

/// What NCCL ran for one side of a row, as far as the two sides can be told
/// apart: algorithm(s), protocol(s), channel count(s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub algo: String,
    pub proto: String,
    pub channels: String,
}

impl Choice {
    /// The choice a placement reports; `None` without an explanation or
    /// when NCCL reported no kernel.
    pub fn of(p: &Placement) -> Option<Choice> {
        let e: &Explanation = p.explain.as_ref()?;
        if e.kernels.is_empty() {
            return None;
        }
        Some(Choice {
            algo: e.algo_text(),
            proto: e.proto_text(),
            channels: e.channels_text(),
        })
    }

    /// `RING/SIMPLE` (send/recv: `Recv+Send`, no protocol).
    fn algo_proto(&self) -> String {
        if self.proto == "-" {
            self.algo.clone()
        } else {
            format!("{}/{}", self.algo, self.proto)
        }
    }
}

/// How NCCL's choice for a row changed between BASE and NEW.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChoiceChange {
    pub base: Choice,
    pub new: Choice,
}

impl ChoiceChange {
    /// For the table: `RING/SIMPLE/24 -> TREE/LL128/16`.
    pub fn cell(&self) -> String {
        let side = |c: &Choice| format!("{}/{}", c.algo_proto(), c.channels);
        format!("{} -> {}", side(&self.base), side(&self.new))
    }

    /// In words: `NCCL used RING/SIMPLE before and TREE/LL128 now`, with
    /// the channels where they differ too.
    pub fn words(&self) -> String {
        let (b, n) = (&self.base, &self.new);
        let mut parts = Vec::new();
        if b.algo_proto() != n.algo_proto() {
            parts.push(format!(
                "NCCL used {} before and {} now",
                b.algo_proto(),
                n.algo_proto()
            ));
        }
        if b.channels != n.channels {
            parts.push(format!(
                "{} channels before and {} now",
                b.channels, n.channels
            ));
        }
        let s = parts.join(", ");
        if parts.len() == 1 && b.algo_proto() == n.algo_proto() {
            format!("NCCL used {} on {s}", n.algo_proto())
        } else {
            s
        }
    }
}

impl Row {
    /// NCCL's choice on both sides, when both runs say.
    pub fn choices(&self) -> Option<(Choice, Choice)> {
        Some((Choice::of(&self.base)?, Choice::of(&self.new)?))
    }

    /// How NCCL's choice changed; `None` when it did not or a side cannot
    /// say.
    pub fn choice_change(&self) -> Option<ChoiceChange> {
        let (base, new) = self.choices()?;
        (base != new).then_some(ChoiceChange { base, new })
    }

    /// The judged figure's change as the verdict saw it: `busbw -12.0%`,
    /// `time +40.0%`.
    fn change_words(&self) -> String {
        let name = if self.by_time { "time" } else { self.bw_name };
        format!("{name} {:+.1}%", (self.judged_ratio() - 1.0) * 100.0)
    }
}

/// Whether any row of `cmp` changed NCCL's choice (the table then has the
/// `NCCL base -> new` column).
pub fn any_choice_change(cmp: &Comparison) -> bool {
    cmp.rows.iter().any(|r| r.choice_change().is_some())
}

/// One line per regression of `cmp` whose two sides say what NCCL ran:
/// the change in NCCL's choice, or that it was the same in both runs (so
/// the cause is elsewhere).
pub fn regression_notes(cmp: &Comparison) -> Vec<String> {
    cmp.regressions()
        .filter_map(|r| {
            let (base, new) = r.choices()?;
            let what = if base == new {
                format!(
                    "NCCL used {} on {} channels in both runs",
                    new.algo_proto(),
                    new.channels
                )
            } else {
                ChoiceChange { base, new }.words()
            };
            Some(format!("{}: {}, {what}", r.short_name(), r.change_words()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::case;
    use crate::compare::{compare, Verdict};
    use collbench_core::{KernelChoice, Record};

    /// What NCCL ran for a case: algorithm, protocol, channels.
    type Ran<'a> = Option<(&'a str, &'a str, u64)>;

    /// An all_reduce record: (size, busbw, what NCCL ran or nothing).
    fn rec(cases: &[(u64, f64, Ran)]) -> Record {
        let mut r = Record::new("collbench");
        for &(size, busbw, choice) in cases {
            let explain = choice.map(|(algo, proto, channels)| {
                let kernel = KernelChoice::new("AllReduce", algo, proto, channels);
                Explanation::from_kernels([kernel], [], 0)
            });
            // Time as the busbw says (medians are what the rule compares).
            r.results
                .push(case(size, size as f64 / busbw / 1e3, busbw, explain));
        }
        r
    }

    const MIB64: u64 = 64 << 20;
    const GIB: u64 = 1 << 30;

    #[test]
    fn a_regression_with_a_protocol_change_names_it() {
        // Two adjacent sizes: one alone is never a regression.
        let ring = Some(("RING", "SIMPLE", 24));
        let tree = Some(("TREE", "LL128", 24));
        let base = rec(&[(MIB64, 100.0, ring), (GIB, 100.0, ring)]);
        let new = rec(&[(MIB64, 88.0, tree), (GIB, 88.0, tree)]);
        let c = compare(&[base], &[new], 5.0);
        assert_eq!(c.rows[0].verdict, Verdict::Regression);
        assert_eq!(
            regression_notes(&c)[0],
            "all_reduce float sum 64 MiB out-of-place: busbw -12.0%, \
             NCCL used RING/SIMPLE before and TREE/LL128 now"
        );
        let table = c.table();
        assert!(table
            .lines()
            .next()
            .unwrap()
            .ends_with("| NCCL base -> new |"));
        assert!(
            table.contains("| **REGRESSION** | RING/SIMPLE/24 -> TREE/LL128/24 |"),
            "{table}"
        );
        assert!(
            c.regression_table().contains("| 0.880 | [")
                && c.regression_table()
                    .contains("| RING/SIMPLE/24 -> TREE/LL128/24 |"),
            "{}",
            c.regression_table()
        );
    }

    #[test]
    fn a_change_without_regression_is_in_the_table_only() {
        let base = rec(&[
            (MIB64, 100.0, Some(("RING", "SIMPLE", 24))),
            (GIB, 300.0, Some(("RING", "SIMPLE", 24))),
        ]);
        let new = rec(&[
            (MIB64, 101.0, Some(("RING", "SIMPLE", 24))),
            (GIB, 301.0, Some(("RING", "SIMPLE", 32))),
        ]);
        let c = compare(&[base], &[new], 5.0);
        assert!(c.regressions().next().is_none());
        assert!(regression_notes(&c).is_empty());
        assert_eq!(c.regression_table(), "");
        let table = c.table();
        let rows: Vec<&str> = table.lines().skip(2).collect();
        assert!(rows[0].ends_with("|  |  |"), "unchanged row: {table}");
        assert!(
            rows[1].ends_with("|  | RING/SIMPLE/24 -> RING/SIMPLE/32 |"),
            "{table}"
        );
    }

    #[test]
    fn a_regression_with_the_same_choice_says_so() {
        let ring = Some(("RING", "SIMPLE", 24));
        let base = rec(&[(GIB, 300.0, ring), (2 * GIB, 300.0, ring)]);
        let new = rec(&[(GIB, 200.0, ring), (2 * GIB, 200.0, ring)]);
        let c = compare(&[base], &[new], 5.0);
        assert_eq!(
            regression_notes(&c)[0],
            "all_reduce float sum 1 GiB out-of-place: busbw -33.3%, \
             NCCL used RING/SIMPLE on 24 channels in both runs"
        );
        // Nothing changed: the tables keep their usual columns.
        assert!(!c.table().contains("NCCL"));
        assert!(!c.regression_table().contains("NCCL"));
    }

    #[test]
    fn one_side_without_explanations_claims_nothing() {
        let base = rec(&[
            (GIB, 300.0, None),
            (2 * GIB, 300.0, None),
            (MIB64, 100.0, None),
        ]);
        let new = rec(&[
            (GIB, 200.0, Some(("TREE", "LL128", 24))),
            (2 * GIB, 200.0, Some(("TREE", "LL128", 24))),
            (MIB64, 100.0, Some(("TREE", "LL128", 24))),
        ]);
        let c = compare(std::slice::from_ref(&base), std::slice::from_ref(&new), 5.0);
        assert_eq!(c.regressions().count(), 2);
        assert!(regression_notes(&c).is_empty());
        assert!(!any_choice_change(&c));
        // The output is the one the same numbers give without any explanation.
        let bare = |r: &Record| {
            let mut r = r.clone();
            for c in &mut r.results {
                c.out_of_place.as_mut().unwrap().explain = None;
            }
            r
        };
        let plain = compare(&[bare(&base)], &[bare(&new)], 5.0);
        assert_eq!(c.table(), plain.table());
        assert_eq!(c.regression_table(), plain.regression_table());
        assert_eq!(c.verdict_line(), plain.verdict_line());
        // "NCCL could not say" counts as no explanation, too.
        let mut unavailable = new.clone();
        unavailable.results[0]
            .out_of_place
            .as_mut()
            .unwrap()
            .explain = Some(Box::new(Explanation::unavailable(
            "NCCL_PROFILER_PLUGIN is the user's",
        )));
        let c = compare(&[new], &[unavailable], 5.0);
        assert!(!any_choice_change(&c));
    }

    fn choice(algo: &str, proto: &str, channels: &str) -> Choice {
        Choice {
            algo: algo.into(),
            proto: proto.into(),
            channels: channels.into(),
        }
    }

    #[test]
    fn words_name_what_changed() {
        let c = ChoiceChange {
            base: choice("RING", "SIMPLE", "24"),
            new: choice("TREE", "LL128", "24"),
        };
        assert_eq!(c.words(), "NCCL used RING/SIMPLE before and TREE/LL128 now");
        assert_eq!(c.cell(), "RING/SIMPLE/24 -> TREE/LL128/24");
        let c = ChoiceChange {
            base: choice("RING", "SIMPLE", "24"),
            new: choice("RING", "SIMPLE", "16"),
        };
        assert_eq!(
            c.words(),
            "NCCL used RING/SIMPLE on 24 channels before and 16 now"
        );
        let c = ChoiceChange {
            base: choice("RING", "LL", "2"),
            new: choice("TREE", "LL", "4"),
        };
        assert_eq!(
            c.words(),
            "NCCL used RING/LL before and TREE/LL now, 2 channels before and 4 now"
        );
        let c = ChoiceChange {
            base: choice("Recv+Send", "-", "1"),
            new: choice("Recv+Send", "-", "2"),
        };
        assert_eq!(c.cell(), "Recv+Send/1 -> Recv+Send/2");
    }
}
