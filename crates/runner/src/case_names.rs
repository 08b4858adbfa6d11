//! The names of the cases run so far, by their number in the plan's order,
//! for the watchdog's line ("all_reduce 64 MiB in place").
//!
//! `-N 0` runs for days, a placement every millisecond on small sizes: a
//! name kept for every case grew the process by about 200 MB an hour. The
//! processes of a job run the same case at once (every placement ends in
//! a gather), so a rank stuck behind is at most a case or two back; the
//! last [`KEPT`] names are all the watchdog ever asks for.

use std::collections::VecDeque;

/// Names kept: far more than a rank can lag behind the others.
pub const KEPT: usize = 1024;

/// The last [`KEPT`] case names and the number of the first one kept.
#[derive(Debug, Default)]
pub struct CaseNames {
    /// Number of `names[0]`.
    first: u32,
    names: VecDeque<String>,
}

impl CaseNames {
    /// Adds the next case's name; returns its number. Numbers count every
    /// case from 0 and stop at `u32::MAX` (years of cases) rather than
    /// wrap, so an order between ranks stays an order.
    pub fn push(&mut self, name: String) -> u32 {
        let next = self.first.saturating_add(self.names.len() as u32);
        if self.last() == Some(u32::MAX) {
            // The last number is taken for good: it names the newest case.
            if let Some(last) = self.names.back_mut() {
                *last = name;
            }
            return u32::MAX;
        }
        self.names.push_back(name);
        if self.names.len() > KEPT {
            self.names.pop_front();
            self.first = self.first.saturating_add(1);
        }
        next
    }

    /// The number of the newest case, if any.
    fn last(&self) -> Option<u32> {
        (!self.names.is_empty()).then(|| self.first + (self.names.len() as u32 - 1))
    }

    /// Case `number`'s name, if it is among the last [`KEPT`].
    pub fn get(&self, number: u32) -> Option<String> {
        let at = number.checked_sub(self.first)? as usize;
        self.names.get(at).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_count_every_case_and_only_the_last_names_stay() {
        let mut n = CaseNames::default();
        for i in 0..(3 * KEPT as u32) {
            assert_eq!(n.push(format!("case {i}")), i);
            assert!(n.names.len() <= KEPT);
        }
        let newest = 3 * KEPT as u32 - 1;
        assert_eq!(n.get(newest).as_deref(), Some(&*format!("case {newest}")));
        let oldest = newest + 1 - KEPT as u32;
        assert_eq!(n.get(oldest).as_deref(), Some(&*format!("case {oldest}")));
        assert_eq!(n.get(oldest - 1), None);
        assert_eq!(n.get(newest + 1), None);
    }

    #[test]
    fn the_number_stops_at_the_largest_rather_than_wrapping() {
        let mut n = CaseNames {
            first: u32::MAX - 2,
            names: VecDeque::new(),
        };
        assert_eq!(n.push("a".into()), u32::MAX - 2);
        assert_eq!(n.push("b".into()), u32::MAX - 1);
        assert_eq!(n.push("c".into()), u32::MAX);
        assert_eq!(n.push("d".into()), u32::MAX);
        assert_eq!(n.get(u32::MAX).as_deref(), Some("d"));
        assert_eq!(n.get(u32::MAX - 1).as_deref(), Some("b"));
        assert_eq!(n.names.len(), 3);
    }
}
