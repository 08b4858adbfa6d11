//! `run --format json|csv|md` on standard output. The document is whole
//! only at the end, but its first line never changes (`{`, CSV's header,
//! `# collbench results`), so it goes out as the run begins: a stdout
//! that refuses it (`> /dev/full`, a full disk) stops the run before its
//! first row, and a reader that took it and left (`| head -1`) is seen at
//! the next row, as with the streamed text. Either way the rows measured
//! so far go to `--output`/`-J`, marked partial: such a run used to
//! measure the whole sweep for nobody, then write neither file.

use collbench_core::Record;
use collbench_output::Format;

/// The first line of `format`'s document for `record`, newline included.
pub fn first_line(format: Format, record: &Record) -> Vec<u8> {
    let bytes = format.exporter().serialize(record);
    let end = bytes
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |i| i + 1);
    bytes[..end].to_vec()
}

/// What is left of the document `whole` once `written` (its first line)
/// is out; all of it where it does not begin so.
pub fn rest<'a>(whole: &'a [u8], written: &[u8]) -> &'a [u8] {
    whole.strip_prefix(written).unwrap_or(whole)
}

/// Whether standard output's reader has gone: a pipe whose reading end is
/// closed, a socket hung up (poll's POLLERR, POLLHUP). Never blocks; false
/// where poll cannot tell, and for files and terminals.
pub fn reader_gone() -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let out = std::io::stdout();
    let mut fds = [PollFd::new(&out, PollFlags::OUT)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&now)) {
        Ok(_) => fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documents_first_line_is_fixed_and_the_rest_follows_it() {
        let mut record = Record::default();
        let empty: Vec<Vec<u8>> = [Format::Json, Format::Csv, Format::Markdown]
            .into_iter()
            .map(|f| first_line(f, &record))
            .collect();
        record.backend = Some("cpu".into());
        record.partial = Some("stopped".into());
        for (f, head) in [Format::Json, Format::Csv, Format::Markdown]
            .into_iter()
            .zip(empty)
        {
            let whole = f.exporter().serialize(&record);
            assert_eq!(first_line(f, &record), head, "{f:?}");
            assert!(head.ends_with(b"\n"), "{f:?}");
            let mut joined = head.clone();
            joined.extend_from_slice(rest(&whole, &head));
            assert_eq!(joined, whole, "{f:?}");
        }
        assert_eq!(rest(b"abc", b"x"), b"abc");
    }
}
