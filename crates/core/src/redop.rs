//! Reduction operators, named as nccl-tests names them.

use crate::ParseError;
use serde::{Deserialize, Serialize};

/// A reduction operator (`-o`).
///
/// The discriminants are a contract with the GPU verification kernels
/// (`crates/nccl/kernels/verify.cu` receives `op as i32`); a test in
/// collbench-nccl checks them against the .cu file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum ReduceOp {
    Sum = 0,
    Prod = 1,
    Max = 2,
    Min = 3,
    Avg = 4,
    /// ncclRedOpCreatePreMulSum: each rank's input is multiplied by a
    /// per-rank scalar before the sum.
    MulSum = 5,
}

impl ReduceOp {
    /// Every operator, in nccl-tests' order (`-o all`).
    pub const ALL: [ReduceOp; 6] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Avg,
        ReduceOp::MulSum,
    ];

    /// The name printed in the `redop` column.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Avg => "avg",
            ReduceOp::MulSum => "mulsum",
        }
    }

    /// Parses a name as nccl-tests' `-o` takes it.
    pub fn parse(s: &str) -> Result<ReduceOp, ParseError> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "sum" => ReduceOp::Sum,
            "prod" => ReduceOp::Prod,
            "max" => ReduceOp::Max,
            "min" => ReduceOp::Min,
            "avg" => ReduceOp::Avg,
            "mulsum" | "premulsum" => ReduceOp::MulSum,
            _ => {
                return Err(ParseError::Unknown {
                    what: "reduction operator",
                    value: s.to_string(),
                    expected: "sum, prod, max, min, avg, mulsum".into(),
                })
            }
        })
    }
}

impl std::fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
