//! Scanning a log's text without knowing its format: words found in one
//! pass per line, and whether a text is JSON. A leaf: both the readers
//! (`parse`) and the checks after them (`input::fault`) use it.

/// Whether `text` is JSON by how it starts: `{`, or `[` followed by `{`
/// or `]` (collbench's array of records). A `[` that opens a shell prompt
/// (`[user@host ~]$`), an MPI tag (`[1,0]<stdout>:`) or a host tag
/// (`[node1:1234]`) starts a text log: taking those for JSON once refused
/// whole logs ("expected a collbench record").
pub fn looks_like_json(text: &str) -> bool {
    let head = text.trim_start();
    let next = || head[1..].trim_start().as_bytes().first().copied();
    match head.as_bytes().first() {
        // A Python dict (`{'CUDA_HOME': ...}`) printed by a job script is
        // not JSON: JSON's keys are in double quotes.
        Some(b'{') => matches!(next(), Some(b'"' | b'}') | None),
        Some(b'[') => matches!(next(), Some(b'{' | b']') | None),
        _ => false,
    }
}

/// Words to find in every line of a log, in one pass over it: each
/// position's two bytes are looked up in a table of the words' first two,
/// and only there are the words compared. `str::find` per word builds a
/// searcher on every call; with 16 crash markers per line that once took a
/// third of reading a 60 MB log.
pub struct Needles {
    /// A bit per pair of bytes that starts a word.
    pairs: [u64; 1024],
    words: &'static [&'static str],
}

impl Needles {
    /// The table of `words` (each at least two bytes long).
    pub const fn new(words: &'static [&'static str]) -> Needles {
        let mut pairs = [0u64; 1024];
        let mut i = 0;
        while i < words.len() {
            let b = words[i].as_bytes();
            let k = ((b[0] as usize) << 8) | b[1] as usize;
            pairs[k / 64] |= 1 << (k % 64);
            i += 1;
        }
        Needles { pairs, words }
    }

    /// Where the first of the words starts in `hay`.
    pub fn find(&self, hay: &str) -> Option<usize> {
        let b = hay.as_bytes();
        (0..b.len().saturating_sub(1)).find(|&i| {
            let k = ((b[i] as usize) << 8) | b[i + 1] as usize;
            (self.pairs[k / 64] >> (k % 64)) & 1 == 1
                && self.words.iter().any(|w| b[i..].starts_with(w.as_bytes()))
        })
    }
}
