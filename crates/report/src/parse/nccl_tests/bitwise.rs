//! nccl-tests' `-B` lines (bitwise repeatability, its pull request #388;
//! collbench's `run -B` prints the same): the repeat count under the run
//! settings, the first difference under a row whose bits differed, and
//! the footer's count. The `#bitdiff` columns are read with the table
//! ([`super::super::nccl_table`]).

use super::super::text::{after, num};
use super::super::ParseError;
use super::Parser;
use collbench_core::record::{BitPosition, Bitwise};

impl Parser<'_> {
    /// A `# Bitwise ...` line (`tokens`: after the `#`); `Ok(false)`: not
    /// one of nccl-tests' (left to the caller).
    pub(super) fn bitwise_line(
        &mut self,
        tokens: &[&str],
        line_no: usize,
    ) -> Result<bool, ParseError> {
        match tokens {
            ["Bitwise", "Repeatability:", n, ..] => {
                match num(n, line_no, "the bitwise repeat count") {
                    Ok(v) => self.cur.settings.bitwise_repeats = v,
                    Err(e) => self.notes.skip(e)?,
                }
            }
            ["Bitwise", "mismatch", mode, ..] => {
                if let Err(e) = self.mismatch(mode, tokens, line_no) {
                    self.notes.skip(e)?;
                }
            }
            ["Bitwise", "mismatches", ":", n, verdict, ..] => {
                // The rows' #bitdiff and mismatch lines carry the
                // differences (and fail `compare`); this says it once.
                if *verdict != "OK" || *n != "0" {
                    self.notes.warn(
                        line_no,
                        format!(
                            "nccl-tests found {n} placement(s) whose output bits differed \
                             between repeats on the same input ({verdict})"
                        ),
                    );
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `# Bitwise mismatch (in-place): first repeat 2, rank 1, element 7,
    /// bit 30; 1 elements and 1 bits differ`: the first difference of the
    /// last row's placement.
    fn mismatch(&mut self, mode: &str, tokens: &[&str], line_no: usize) -> Result<(), ParseError> {
        let bad = || {
            ParseError::at(line_no, "expected nccl-tests' '# Bitwise mismatch (out-of-place): first repeat R, rank K, element E, bit B; N elements and M bits differ'")
        };
        let number = |key: &str| -> Result<u64, ParseError> {
            let v = after(tokens, key).ok_or_else(bad)?;
            num(v.trim_end_matches([',', ';']), line_no, key)
        };
        let before = |key: &str| -> Result<u64, ParseError> {
            let i = tokens.iter().position(|t| *t == key).ok_or_else(bad)?;
            num(tokens[i.checked_sub(1).ok_or_else(bad)?], line_no, key)
        };
        let first = BitPosition {
            repeat: number("repeat")?,
            rank: number("rank")?,
            element: number("element")?,
            bit: number("bit")?,
        };
        let (elements, bits) = (before("elements")?, before("bits")?);
        let row = self.cur.results.last_mut().ok_or_else(bad)?;
        let placement = match mode.trim_matches(['(', ')', ':']) {
            "out-of-place" => row.out_of_place.as_mut(),
            "in-place" => row.in_place.as_mut(),
            _ => None,
        }
        .ok_or_else(bad)?;
        let repeats = self.cur.settings.bitwise_repeats;
        let b = placement
            .bitwise
            .get_or_insert_with(|| Bitwise::none_yet(repeats));
        b.first = Some(first);
        b.different_elements = elements;
        b.different_bits = bits;
        Ok(())
    }
}
