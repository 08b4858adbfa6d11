//! Element data types, named as nccl-tests names them.

use crate::ParseError;
use serde::{Deserialize, Serialize};

/// A collective's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum DataType {
    Int8,
    Uint8,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Half,
    Float,
    Double,
    Bfloat16,
    F8e4m3,
    F8e5m2,
}

impl DataType {
    /// Every type, in nccl-tests' order (`-d all`); f8 types last.
    pub const ALL: [DataType; 12] = [
        DataType::Int8,
        DataType::Uint8,
        DataType::Int32,
        DataType::Uint32,
        DataType::Int64,
        DataType::Uint64,
        DataType::Half,
        DataType::Float,
        DataType::Double,
        DataType::Bfloat16,
        DataType::F8e4m3,
        DataType::F8e5m2,
    ];

    /// The name nccl-tests prints in its `type` column.
    pub fn name(self) -> &'static str {
        match self {
            DataType::Int8 => "int8",
            DataType::Uint8 => "uint8",
            DataType::Int32 => "int32",
            DataType::Uint32 => "uint32",
            DataType::Int64 => "int64",
            DataType::Uint64 => "uint64",
            DataType::Half => "half",
            DataType::Float => "float",
            DataType::Double => "double",
            DataType::Bfloat16 => "bfloat16",
            DataType::F8e4m3 => "f8e4m3",
            DataType::F8e5m2 => "f8e5m2",
        }
    }

    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            DataType::Int8 | DataType::Uint8 | DataType::F8e4m3 | DataType::F8e5m2 => 1,
            DataType::Half | DataType::Bfloat16 => 2,
            DataType::Int32 | DataType::Uint32 | DataType::Float => 4,
            DataType::Int64 | DataType::Uint64 | DataType::Double => 8,
        }
    }

    /// True for the floating-point types (where `avg` gets a ULP tolerance).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DataType::Half
                | DataType::Float
                | DataType::Double
                | DataType::Bfloat16
                | DataType::F8e4m3
                | DataType::F8e5m2
        )
    }

    /// True for the 8-bit float types, which need newer libraries and GPUs.
    pub fn is_f8(self) -> bool {
        matches!(self, DataType::F8e4m3 | DataType::F8e5m2)
    }

    /// Largest integer magnitude below which every value of a reduction
    /// result, and every partial result, is exact in this type.
    pub fn exact_limit(self) -> u64 {
        match self {
            DataType::Int8 => 127,
            // 255 is the poison value.
            DataType::Uint8 => 127,
            DataType::Half => 1 << 11,
            DataType::Bfloat16 => 1 << 8,
            DataType::F8e4m3 => 16,
            DataType::F8e5m2 => 8,
            DataType::Float => 1 << 24,
            // Integers wider than 24 bits and double: keep the same range as
            // float so one pattern serves every wide type.
            _ => 1 << 24,
        }
    }

    /// Parses a name as nccl-tests' `-d` takes it (also `fp16`, `bf16`, `fp32`...).
    pub fn parse(s: &str) -> Result<DataType, ParseError> {
        let t = match s.to_ascii_lowercase().as_str() {
            "int8" | "char" => DataType::Int8,
            "uint8" => DataType::Uint8,
            "int32" | "int" => DataType::Int32,
            "uint32" => DataType::Uint32,
            "int64" => DataType::Int64,
            "uint64" => DataType::Uint64,
            "half" | "fp16" | "float16" => DataType::Half,
            "float" | "fp32" | "float32" => DataType::Float,
            "double" | "fp64" | "float64" => DataType::Double,
            "bfloat16" | "bf16" => DataType::Bfloat16,
            "f8e4m3" | "fp8_e4m3" | "e4m3" => DataType::F8e4m3,
            "f8e5m2" | "fp8_e5m2" | "e5m2" => DataType::F8e5m2,
            _ => {
                return Err(ParseError::Unknown {
                    what: "data type",
                    value: s.to_string(),
                    expected: DataType::ALL.map(|t| t.name()).join(", "),
                })
            }
        };
        Ok(t)
    }
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in DataType::ALL {
            assert_eq!(DataType::parse(t.name()).unwrap(), t);
        }
        assert!(DataType::parse("float128").is_err());
    }
}
