//! `collbench doctor`: its flags, converted into
//! [`collbench_doctor::DoctorFormat`], and its body.

use collbench_doctor::DoctorFormat as Format;

/// `collbench doctor` flags.
///
/// Exit codes: 0 when every check passes or is skipped, 1 warn, 2 fail.
#[derive(clap::Args, Debug, Clone)]
pub struct DoctorArgs {
    /// Format of stdout (the same flag as `run --format`).
    #[arg(long, value_enum, default_value_t = DoctorFormat::Text)]
    pub format: DoctorFormat,
    /// Older spelling of `--format json`, kept so scripts keep working.
    #[arg(long, hide = true)]
    pub json: bool,
}

value_enum! {
    /// What `doctor` prints on stdout.
    pub enum DoctorFormat => Format {
        /// One line per check.
        Text,
        /// The checks as a JSON array.
        Json,
    }
}

impl DoctorArgs {
    /// The format asked for, `--json` included.
    pub fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else {
            self.format.into()
        }
    }
}

/// `collbench doctor`: the local checks printed, the exit from the worst.
pub fn run(a: &DoctorArgs) -> Result<crate::exit::Outcome, crate::exit::Failure> {
    let (text, code) = collbench_doctor::doctor_main(a.format()).map_err(crate::usage)?;
    crate::stdout::print(&text)?;
    Ok(crate::exit::Outcome::doctor(code))
}
