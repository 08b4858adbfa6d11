//! Clean-up of a log before any parser sees it: terminal colour codes,
//! CRLF and CR line ends, and the prefixes launchers put on every line.
//!
//! Launcher prefixes recognised (one kind per log, chosen when it starts at
//! least half of the non-empty lines; pdsh's `host: ` must start all of them,
//! because `word: ` also begins ordinary lines such as `mype: 6`):
//!
//! | launcher | prefix | stream |
//! | --- | --- | --- |
//! | `srun --label` | `  0: ` | rank |
//! | OpenMPI `--tag-output` | `[1,0]<stdout>:` | rank (second number) |
//! | OpenMPI `--timestamp-output` | `Mon Dec  1 03:02:34 2026` or `[2026-12-01 03:02:34]` | none |
//! | MPICH `mpirun -l` | `[0] ` | rank |
//! | pdsh | `host: ` | host |
//! | Ray, SkyPilot (outside any of the above) | `(worker, rank=1, pid=1234) `, `(pid=77, ip=10.0.0.2) ` | `rank=N`, else the whole tag (used when no inner prefix names the rank) |
//!
//! Lines of different ranks (or hosts) become separate [`Stream`]s, so the
//! output of ranks that printed at the same time is read apart again.

/// One rank's (or host's) lines, with where each came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    /// `rank 1`, `host node2`; `None` when the log had no launcher prefix.
    pub label: Option<String>,
    /// The cleaned text, one `\n` per line.
    pub text: String,
    /// For each line of `text`, its 1-based line number in the original.
    pub line_map: Vec<usize>,
}

impl Stream {
    /// The original line number of line `line` (1-based) of this stream.
    pub fn original_line(&self, line: usize) -> usize {
        match line {
            0 => 0,
            n => self
                .line_map
                .get(n - 1)
                .copied()
                .unwrap_or_else(|| self.line_map.last().copied().unwrap_or(0)),
        }
    }
}

/// The cleaned log: its streams, and what the clean-up had to set aside.
#[derive(Debug, Clone, PartialEq)]
pub struct Cleaned {
    pub streams: Vec<Stream>,
    /// Launcher kind found (`srun --label`, ...), if any.
    pub launcher: Option<&'static str>,
    /// Lines without the launcher's prefix in a prefixed log (ignored).
    pub unprefixed: Vec<usize>,
    /// The number of the original's last line.
    pub last_line: usize,
    /// Whether that line has no line end: the writer stopped mid-line.
    pub cut_last_line: bool,
}

/// Cleans `text`: removes ANSI escape sequences, splits on CRLF, LF and CR,
/// strips launcher prefixes and separates the streams they name.
pub fn clean(text: &str) -> Cleaned {
    let plain = strip_ansi(text);
    let lines: Vec<&str> = split_lines(&plain);
    let last_line = lines.len();
    let cut_last_line = !plain.is_empty() && !plain.ends_with(['\n', '\r']);
    // Ray's tag is outermost (it wraps what the job printed, MPI's tags
    // included); then timestamps: OpenMPI puts them in front of its tag.
    let (ray, lines): (Vec<Option<String>>, Vec<&str>) = lines
        .iter()
        .map(|l| {
            let (label, rest) = split_ray(l);
            (label, strip_timestamp(rest))
        })
        .unzip();
    let nonempty = lines.iter().filter(|l| !l.trim().is_empty()).count();
    let mut best: Option<(Kind, usize)> = None;
    for kind in Kind::ALL {
        let n = lines.iter().filter(|l| kind.split(l).is_some()).count();
        let enough = match kind {
            Kind::Pdsh => n == nonempty,
            _ => 2 * n >= nonempty,
        };
        if n > 0 && enough && best.is_none_or(|(_, b)| n > b) {
            best = Some((kind, n));
        }
    }
    let ray_lines = ray.iter().filter(|r| r.is_some()).count();
    if best.is_none() && ray_lines > 0 && 2 * ray_lines >= nonempty {
        return by_prefix(
            &lines,
            |i, l| ray[i].clone().map(|k| (k, l)),
            "Ray/SkyPilot",
            last_line,
            cut_last_line,
        );
    }
    let Some((kind, _)) = best else {
        let mut text = String::with_capacity(plain.len());
        for l in &lines {
            // OpenMPI's tag on some lines only (rows tagged, a wrapper's
            // lines not): unmistakable, so it goes wherever it is.
            let l = Kind::OpenMpi.split(l).map_or(*l, |(_, rest)| rest);
            text.push_str(&without_inner_tags(l));
            text.push('\n');
        }
        return Cleaned {
            streams: vec![Stream {
                label: None,
                text,
                line_map: (1..=lines.len()).collect(),
            }],
            launcher: None,
            unprefixed: Vec::new(),
            last_line,
            cut_last_line,
        };
    };
    by_prefix(
        &lines,
        |_, l| kind.split(l),
        kind.name(),
        last_line,
        cut_last_line,
    )
}

/// Separates `lines` into streams by the key `split` finds on each line
/// (given its index), with the line left after the prefix; lines without
/// one belong to the only stream when there is one, else are counted in
/// [`Cleaned::unprefixed`].
fn by_prefix<'a>(
    lines: &[&'a str],
    split: impl Fn(usize, &'a str) -> Option<(String, &'a str)>,
    launcher: &'static str,
    last_line: usize,
    cut_last_line: bool,
) -> Cleaned {
    let mut streams: Vec<Stream> = Vec::new();
    let mut unprefixed = Vec::new();
    let split: Vec<Option<(String, &str)>> =
        lines.iter().enumerate().map(|(i, l)| split(i, l)).collect();
    // One stream only (rank 0's rows tagged, a wrapper's header not): its
    // untagged lines are its own, in order.
    let mut keys = split.iter().flatten().map(|(k, _)| k);
    let only = keys
        .next()
        .filter(|first| keys.all(|k| k == *first))
        .cloned();
    for (i, (l, tagged)) in lines.iter().zip(split).enumerate() {
        let Some((key, rest)) = tagged.or_else(|| only.clone().map(|k| (k, *l))) else {
            if !l.trim().is_empty() {
                unprefixed.push(i + 1);
            }
            continue;
        };
        let label = Some(key);
        let s = match streams.iter_mut().position(|s| s.label == label) {
            Some(k) => &mut streams[k],
            None => {
                streams.push(Stream {
                    label,
                    text: String::new(),
                    line_map: Vec::new(),
                });
                streams.last_mut().expect("just pushed")
            }
        };
        s.text.push_str(&without_inner_tags(strip_timestamp(rest)));
        s.text.push('\n');
        s.line_map.push(i + 1);
    }
    Cleaned {
        streams,
        launcher: Some(launcher),
        unprefixed,
        last_line,
        cut_last_line,
    }
}

/// Ray's (and SkyPilot's) tag on a worker's line, `(worker, rank=1,
/// pid=1234) ` or `(pid=77, ip=10.0.0.2) `: the stream (`rank 1`, else
/// the tag) and the line after it; other lines come back unchanged.
fn split_ray(line: &str) -> (Option<String>, &str) {
    let Some(rest) = line.strip_prefix('(') else {
        return (None, line);
    };
    let Some((tag, after)) = rest.split_once(") ") else {
        return (None, line);
    };
    let mut words = tag.split([',', ' ']);
    if !words.clone().any(|w| w.starts_with("pid=")) {
        return (None, line);
    }
    let label = match words.find_map(|w| w.strip_prefix("rank=")) {
        Some(r) if is_digits(r) => format!("rank {r}"),
        _ => tag.to_string(),
    };
    (Some(label), after)
}

/// Removes CSI (`ESC [ ... letter`), OSC (`ESC ] ... BEL` or `ESC \`) and
/// two-byte escape sequences: colour codes from terminals and `less -R`.
pub fn strip_ansi(text: &str) -> std::borrow::Cow<'_, str> {
    // Most logs have none: no copy of a large text then.
    if !text.contains('\u{1b}') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                // Parameters and intermediates, then one final byte @..~.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Splits on `\r\n`, `\n` and a lone `\r` (old Mac line ends); no empty
/// last line for a text that ends with a line end.
fn split_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            b'\r' => {
                out.push(&text[start..i]);
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// The launcher prefixes we know.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    OpenMpi,
    Mpich,
    Srun,
    Pdsh,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::OpenMpi, Kind::Mpich, Kind::Srun, Kind::Pdsh];

    fn name(self) -> &'static str {
        match self {
            Kind::OpenMpi => "OpenMPI --tag-output",
            Kind::Mpich => "mpirun -l",
            Kind::Srun => "srun --label",
            Kind::Pdsh => "pdsh",
        }
    }

    /// The stream this line belongs to and the line without its prefix.
    fn split(self, line: &str) -> Option<(String, &str)> {
        match self {
            Kind::OpenMpi => {
                // Pasted logs may be indented.
                let rest = line.trim_start().strip_prefix('[')?;
                let (ids, rest) = rest.split_once(']')?;
                let (job, rank) = ids.split_once(',')?;
                if !(is_digits(job) && is_digits(rank)) {
                    return None;
                }
                let rest = rest.strip_prefix('<')?;
                let (chan, rest) = rest.split_once(">:")?;
                if !matches!(chan, "stdout" | "stderr" | "stddiag") {
                    return None;
                }
                Some((format!("rank {rank}"), rest))
            }
            Kind::Mpich => {
                let rest = line.strip_prefix('[')?;
                let (rank, rest) = rest.split_once(']')?;
                if !is_digits(rank) {
                    return None;
                }
                let rest = rest.strip_prefix(' ').unwrap_or(rest);
                Some((format!("rank {rank}"), rest))
            }
            Kind::Srun => {
                let t = line.trim_start();
                let (rank, rest) = t.split_once(':')?;
                if !is_digits(rank) {
                    return None;
                }
                // srun writes "0: text"; a bare "0:" is an empty line.
                if !(rest.is_empty() || rest.starts_with(' ')) {
                    return None;
                }
                Some((
                    format!("rank {rank}"),
                    rest.strip_prefix(' ').unwrap_or(rest),
                ))
            }
            Kind::Pdsh => {
                let (host, rest) = line.split_once(": ")?;
                let ok = !host.is_empty()
                    && host.len() <= 64
                    && host.as_bytes()[0].is_ascii_alphanumeric()
                    && host
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
                ok.then(|| (format!("host {host}"), rest))
            }
        }
    }
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit())
}

/// `line` without the OpenMPI tags (`[1,0]<stdout>:`) inside it: OpenMPI
/// tags every write, and nccl-tests writes a row in three (`   8  2 float
/// sum  -1[1,0]<stdout>:   85.14 ...`). Each becomes a space, so the
/// cells on either side stay apart.
fn without_inner_tags(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.contains("]<std") {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        let tagged = Kind::OpenMpi.split(&rest[open..]);
        match tagged {
            Some((_, after)) => {
                out.push_str(&rest[..open]);
                out.push(' ');
                rest = after;
            }
            None => {
                out.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// Removes a leading timestamp as OpenMPI's `--timestamp-output` writes it:
/// `ctime` text (`Mon Dec  1 03:02:34 2026`) or a bracketed ISO one
/// (`[2026-12-01 03:02:34.123]`). Other lines come back unchanged.
fn strip_timestamp(line: &str) -> &str {
    if let Some(rest) = line.strip_prefix('[') {
        if let Some((ts, after)) = rest.split_once(']') {
            if iso_like(ts) {
                return after.strip_prefix(' ').unwrap_or(after);
            }
        }
        return line;
    }
    const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mut it = line.split_ascii_whitespace();
    let (Some(d), Some(m), Some(day), Some(time), Some(year)) =
        (it.next(), it.next(), it.next(), it.next(), it.next())
    else {
        return line;
    };
    let year_digits = year.bytes().take_while(u8::is_ascii_digit).count();
    if !(DAYS.contains(&d)
        && MONTHS.contains(&m)
        && is_digits(day)
        && time.len() == 8
        && time.bytes().filter(|b| *b == b':').count() == 2
        && year_digits == 4)
    {
        return line;
    }
    // Skip to just after the 4 digits of the year (the tag may follow at once).
    let Some(at) = line.find(year) else {
        return line;
    };
    let rest = &line[at + 4..];
    rest.strip_prefix(' ').unwrap_or(rest)
}

fn iso_like(ts: &str) -> bool {
    let b = ts.as_bytes();
    b.len() >= 19
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[7] == b'-'
        && (b[10] == b' ' || b[10] == b'T')
        && b[13] == b':'
        && b[16] == b':'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_and_line_ends_go() {
        let c = clean("\u{1b}[1;32m# nThread 1\u{1b}[0m\r\n8 2\r16 4\n");
        assert_eq!(c.streams.len(), 1);
        assert_eq!(c.streams[0].text, "# nThread 1\n8 2\n16 4\n");
        assert_eq!(c.launcher, None);
    }

    #[test]
    fn prefixes_are_stripped_and_split() {
        let c = clean("  0: # a\n  1: # b\n  0: 8 2\n");
        assert_eq!(c.launcher, Some("srun --label"));
        assert_eq!(c.streams[0].text, "# a\n8 2\n");
        assert_eq!(c.streams[0].line_map, [1, 3]);
        assert_eq!(c.streams[1].label.as_deref(), Some("rank 1"));

        let c = clean("[1,0]<stdout>: # a\n[1,1]<stdout>:x\n");
        assert_eq!(c.launcher, Some("OpenMPI --tag-output"));
        assert_eq!(c.streams[0].text, " # a\n");
        assert_eq!(c.streams[1].text, "x\n");

        let c = clean("[1,0]<stdout>:   8   2  -1[1,0]<stdout>:   85.14[1,0]<stdout>:  62.8\n");
        assert_eq!(c.streams[0].text, "   8   2  -1    85.14   62.8\n");

        let c = clean("Mon Dec  1 03:02:34 2026[1,0]<stdout>:# a\n");
        assert_eq!(c.streams[0].text, "# a\n");
        let c = clean("[2026-12-01 03:02:34] # a\n");
        assert_eq!(c.streams[0].text, "# a\n");

        let c = clean("[0] # a\n[1] # b\n");
        assert_eq!(c.launcher, Some("mpirun -l"));
        let c = clean("node1: # a\nnode1: 8 2\n");
        assert_eq!(c.launcher, Some("pdsh"));
        assert_eq!(c.streams[0].label.as_deref(), Some("host node1"));
        // Only some lines look like "word: ": no prefix.
        let c = clean("mype: 6 mype_node: 2\n# size(B) count\n8 2\n");
        assert_eq!(c.launcher, None);
    }
}
