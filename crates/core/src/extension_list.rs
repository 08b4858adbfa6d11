//! The placement extensions (`crate::extension`) there are, in the order
//! their cells, lines and keys are printed, and the set a run turned on.
//! Printers, parsers, faults and the exit code iterate this list.

use crate::extension::PlacementExtension;
use crate::record::RunSettings;

/// Every placement extension, in print order.
pub fn extensions() -> &'static [&'static dyn PlacementExtension] {
    EXTENSIONS
}

static EXTENSIONS: &[&dyn PlacementExtension] = &[&crate::record::bitwise::BITWISE];

/// The extensions a run's settings turned on, as a set of positions in
/// [`extensions`] (copied with the text options).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Active(u64);

impl Active {
    /// Those `settings` turned on.
    pub fn of(settings: &RunSettings) -> Active {
        let bits = extensions()
            .iter()
            .enumerate()
            .filter(|(_, e)| e.active(settings))
            .fold(0u64, |bits, (i, _)| bits | 1 << i);
        Active(bits)
    }

    /// Whether none is on.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Those on, in the list's order.
    pub fn iter(self) -> impl Iterator<Item = &'static dyn PlacementExtension> {
        extensions()
            .iter()
            .enumerate()
            .filter(move |(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, e)| *e)
    }
}
