//! One room per command (issue #52): each module holds the command's
//! flags (clap's structs: only the CLI depends on clap), their conversion
//! into the plain options or typed request its library owns, and its
//! body. `main.rs` parses, dispatches here and maps the exit.

#[macro_use]
mod value_enum;

pub mod check;
pub mod doctor;
pub mod expect;
pub mod gen;
pub mod output;
pub mod report;
pub mod run;
pub mod tune;
