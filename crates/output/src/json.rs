//! collbench's JSON: the [`collbench_core::Record`] as described by
//! `schema/record.schema.json`.

use crate::Exporter;
use collbench_core::Record;

/// Pretty-printed JSON of the whole record.
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn serialize(&self, record: &Record) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(record).expect("record serialises");
        v.push(b'\n');
        v
    }
}
