//! `run --format`'s values, converted into [`collbench_output::Format`].

use collbench_output::Format as Lib;

value_enum! {
    /// Output formats, for `--format`.
    pub enum Format => Lib {
        /// nccl-tests' text layout.
        #[value(alias = "txt")]
        Text,
        /// collbench's JSON record (schema/record.schema.json).
        Json,
        /// One row per case and placement.
        Csv,
        /// GitHub tables.
        #[value(name = "md", alias = "markdown")]
        Markdown,
        /// nccl-tests' own `-J` layout; chosen by `-J`, never by a file
        /// extension.
        #[value(help = "nccl-tests' own -J JSON layout (as -J writes it)")]
        NcclTestsJson,
    }
}
