//! `-R`: how a test's buffers are registered with NCCL, as one type from
//! the command line to the backend (and `collbench tune`'s candidates).

use serde::{Deserialize, Serialize};

/// How the user buffers are registered with NCCL (nccl-tests `-R`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Registration {
    /// Buffers are not registered (nccl-tests `-R 0`, NCCL's default).
    #[default]
    None,
    /// `ncclCommRegister` on the buffers (`-R 1`).
    Local,
    /// `ncclCommWindowRegister` with `NCCL_WIN_COLL_SYMMETRIC` (`-R 2`).
    Symmetric,
}

impl Registration {
    /// nccl-tests' `-R` value; `None` for one it does not have.
    pub fn from_flag(value: u32) -> Option<Registration> {
        match value {
            0 => Some(Registration::None),
            1 => Some(Registration::Local),
            2 => Some(Registration::Symmetric),
            _ => None,
        }
    }

    /// The `-R` value that asks for it.
    pub fn flag(self) -> u32 {
        match self {
            Registration::None => 0,
            Registration::Local => 1,
            Registration::Symmetric => 2,
        }
    }

    /// Whether any registration is asked for.
    pub fn is_on(self) -> bool {
        self != Registration::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_and_others_are_refused() {
        for v in 0..3 {
            assert_eq!(Registration::from_flag(v).unwrap().flag(), v);
        }
        assert_eq!(Registration::from_flag(3), None);
        assert!(!Registration::default().is_on());
    }
}
