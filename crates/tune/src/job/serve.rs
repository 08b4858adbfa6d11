//! A child process's side (docs/tune.md, section 3): answer the parent's
//! requests with one measurer until the parent closes stdin.

use super::error::TuneError;
use super::fake::{FakeChild, TestFault};
use crate::measure::Measurer;
use std::io::{BufRead, Write};

/// How a child's serving ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// The parent closed its stdin: the search is over.
    InputEnded,
    /// A scripted fault ends the child now (the CLI ends the process).
    Fault(TestFault),
}

fn failed(m: String) -> TuneError {
    TuneError::Failed(format!("child process: {m}"))
}

/// Answers the parent's requests on `input` with `measurer` until
/// `input` ends.
pub fn serve(
    measurer: &mut dyn Measurer,
    input: impl BufRead,
    output: impl Write,
) -> Result<Served, TuneError> {
    crate::child::serve(measurer, input, output).map_err(failed)?;
    Ok(Served::InputEnded)
}

/// [`serve`] with the test fake, which may die by its script (then it
/// ends unheard, as a dead process would).
pub fn serve_fake(
    mut fake: FakeChild<'_>,
    input: impl BufRead,
    output: impl Write,
) -> Result<Served, TuneError> {
    let death = fake.death();
    let died =
        crate::child::serve_until(&mut fake, input, output, &|| death.get()).map_err(failed)?;
    Ok(match died {
        true => Served::Fault(TestFault::Dies),
        false => Served::InputEnded,
    })
}
