//! Which cases of a comparison are next to which: the sizes of one op
//! group and placement in order, and each size's other placement.
//!
//! Built once per comparison in O(n log n). The rule used to find a
//! case's neighbours by sorting and scanning every case for each case,
//! which made a 65,536-row log take 37 s to compare with itself.

use super::shape::CaseShape;
use std::collections::HashMap;

/// The order of a comparison's cases: per (op group, placement) the
/// cases by size, and each case's place in its series and its twin.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Per (group, in_place): case indices by size.
    series: HashMap<(usize, bool), Vec<usize>>,
    /// Each case's position in its series.
    at: Vec<usize>,
    /// Each case's other placement at the same size of its group.
    twin: Vec<Option<usize>>,
    /// How many groups there are (the largest group index + 1).
    pub groups: usize,
}

impl Layout {
    /// The layout of `shapes` (case `i` is `shapes[i]`).
    pub fn new(shapes: &[CaseShape]) -> Layout {
        let mut series: HashMap<(usize, bool), Vec<usize>> = HashMap::new();
        for (i, s) in shapes.iter().enumerate() {
            series.entry((s.group, s.in_place)).or_default().push(i);
        }
        let mut at = vec![0; shapes.len()];
        for v in series.values_mut() {
            v.sort_by_key(|&i| shapes[i].size_bytes);
            for (k, &i) in v.iter().enumerate() {
                at[i] = k;
            }
        }
        let by_key: HashMap<(usize, bool, u64), usize> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| ((s.group, s.in_place, s.size_bytes), i))
            .collect();
        let twin = shapes
            .iter()
            .map(|s| by_key.get(&(s.group, !s.in_place, s.size_bytes)).copied())
            .collect();
        Layout {
            series,
            at,
            twin,
            groups: shapes.iter().map(|s| s.group + 1).max().unwrap_or(0),
        }
    }

    /// The cases of `group` in one placement, by size.
    pub fn ordered(&self, group: usize, in_place: bool) -> &[usize] {
        self.series
            .get(&(group, in_place))
            .map_or(&[], |v| v.as_slice())
    }

    /// Case `i`'s series (its group and placement, by size) and its
    /// position in it.
    pub fn series_of(&self, shapes: &[CaseShape], i: usize) -> (&[usize], usize) {
        (
            self.ordered(shapes[i].group, shapes[i].in_place),
            self.at[i],
        )
    }

    /// The other placement of case `i`'s size, if measured.
    pub fn twin(&self, i: usize) -> Option<usize> {
        self.twin[i]
    }

    /// Case `i`'s neighbours: the next size down and up in its
    /// placement, and its other placement at the same size.
    pub fn neighbours(&self, shapes: &[CaseShape], i: usize) -> impl Iterator<Item = usize> {
        self.size_neighbours(shapes, i).chain(self.twin[i])
    }

    /// Case `i`'s neighbours that are separate evidence: the next size
    /// down and up in its placement. Its other placement is left out:
    /// both placements of one size are timed back to back (nccl-tests'
    /// order, which collbench keeps), so one burst of load slows both.
    pub fn size_neighbours(
        &self,
        shapes: &[CaseShape],
        i: usize,
    ) -> impl Iterator<Item = usize> + use<> {
        let (series, at) = self.series_of(shapes, i);
        let down = at.checked_sub(1).map(|k| series[k]);
        let up = series.get(at + 1).copied();
        down.into_iter().chain(up)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(group: usize, size: u64, in_place: bool) -> CaseShape {
        CaseShape {
            group,
            size_bytes: size,
            in_place,
            by_time: true,
            base_time_us: 1.0,
        }
    }

    #[test]
    fn neighbours_are_the_sizes_around_and_the_other_placement() {
        // Out of order on purpose: the layout sorts by size.
        let shapes = [
            shape(0, 64, false),
            shape(0, 8, false),
            shape(0, 512, false),
            shape(0, 64, true),
            shape(1, 64, false),
        ];
        let l = Layout::new(&shapes);
        let n = |i| l.neighbours(&shapes, i).collect::<Vec<_>>();
        assert_eq!(n(0), [1, 2, 3]);
        assert_eq!(n(1), [0]);
        assert_eq!(n(2), [0]);
        assert_eq!(n(3), [0]);
        assert_eq!(n(4), Vec::<usize>::new());
        assert_eq!(l.ordered(0, false), [1, 0, 2]);
        assert_eq!(l.groups, 2);
    }
}
