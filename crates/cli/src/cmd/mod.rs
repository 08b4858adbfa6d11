//! The flags of the commands whose work lives in a library crate, one
//! module per command: clap's structs here, converted into the plain
//! options the library owns (only the CLI depends on clap).

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
