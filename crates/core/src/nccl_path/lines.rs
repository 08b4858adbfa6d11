//! The shapes of single lines: where NCCL's text starts in a line, which
//! untagged lines are NCCL's, and the small fields read out of one line.
//! Each shape is quoted from a real log in the tests.

use std::borrow::Cow;

/// The text after `NCCL INFO `/`NCCL WARN `, whatever launcher tags, host
/// names and timestamps stand before, with `true`; or a version line
/// NCCL (`NCCL version 2.18.5+cuda12.2`) or RCCL (`RCCL version :
/// 2.21.5-HEAD:9a0e6a1`, its banner) prints untagged, with `false`.
pub(super) fn nccl_body(line: &str) -> Option<(&str, bool)> {
    for tag in ["NCCL INFO ", "NCCL WARN "] {
        if let Some(at) = line.find(tag) {
            return Some((line[at + tag.len()..].trim(), true));
        }
    }
    let at = line
        .find("NCCL version ")
        .or_else(|| line.find("RCCL version"))?;
    Some((line[at..].trim(), false))
}

/// How NCCL's own messages begin: a line of a log that starts so, without
/// NCCL's `host:pid:tid [dev] NCCL INFO ` prefix, is one of its lines
/// pasted with the prefix cut (`Using network IBext_v8`).
const BARE_HEADS: [&str; 9] = [
    "Using network ",
    "NET/",
    "Channel ",
    "Ring ",
    "NVLS multicast support",
    "Connected NVLS",
    "Connected CollNet",
    "NCCL_",
    "Failed to open libibverbs",
];

/// A line that reads as one of NCCL's messages with its prefix cut.
pub(super) fn bare_body(line: &str) -> Option<&str> {
    let text = line.trim();
    let nccl = BARE_HEADS.iter().any(|h| text.starts_with(h)) || coll_channels(text).is_some();
    nccl.then_some(text)
}

/// Whether the line is NCCL's or RCCL's version line.
pub(super) fn is_version(body: &str) -> bool {
    body.contains("NCCL version ") || body.contains("RCCL version")
}

/// `NCCL version 2.18.5+cuda12.2` -> `2.18.5`; `RCCL version :
/// 2.21.5-HEAD:9a0e6a1` -> `2.21.5`.
pub(super) fn version_of(body: &str) -> Option<String> {
    let at = body
        .find("NCCL version")
        .or_else(|| body.find("RCCL version"))?;
    let rest = body[at + "NCCL version".len()..].trim_start_matches([' ', ':']);
    let v: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    (!v.is_empty()).then_some(v)
}

/// `plugin/net.cc:118 -> 2`, `include/net.h:24 -> 2`: NCCL's trace of an
/// error a network plugin returned (its initialisation failed).
pub(super) fn net_trace(body: &str) -> bool {
    let Some((place, code)) = body.split_once(" -> ") else {
        return false;
    };
    let Some((file, line_no)) = place.rsplit_once(':') else {
        return false;
    };
    let name = file.rsplit('/').next().unwrap_or(file);
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name.starts_with("net.") && number(line_no) && number(code.trim())
}

/// A log pasted through HTML reads `0[0] -&gt; 1[1]`: the text NCCL wrote.
pub(super) fn unescape_html(body: &str) -> Cow<'_, str> {
    if !body.contains('&') {
        return Cow::Borrowed(body);
    }
    Cow::Owned(
        body.replace("&gt;", ">")
            .replace("&lt;", "<")
            .replace("&quot;", "\"")
            .replace("&amp;", "&"),
    )
}

/// `2 coll channels, 0 nvls channels, 2 p2p channels` -> 0.
pub(super) fn nvls_channels(body: &str) -> Option<u64> {
    let (before, _) = body.split_once(" nvls channels")?;
    before.split_whitespace().last()?.parse().ok()
}

/// `24 coll channels, 0 nvls channels, 32 p2p channels, ...` -> 24.
pub(super) fn coll_channels(body: &str) -> Option<u64> {
    let (count, _) = body.split_once(" coll channels")?;
    count.trim().parse().ok()
}

/// `Channel 00/04 :    0   1   2   3` (a ring, NCCL 2.7 and later) -> 4.
/// Connection lines (`Channel 00/0 : 0[0] -> 1[1] via P2P`) carry the
/// connection index there instead, and are read elsewhere.
pub(super) fn ring_channels(body: &str) -> Option<u64> {
    let rest = body.strip_prefix("Channel ")?;
    let (ids, ranks) = rest.split_once(':')?;
    if ranks.contains("->") || ranks.contains(" via ") {
        return None;
    }
    let (_, count) = ids.trim().split_once('/')?;
    count.trim().parse().ok()
}

/// `NCCL_IB_DISABLE set by environment to 1.` -> (`NCCL_IB_DISABLE`, `1`);
/// also the shorter form some versions print for a NIC list (`NCCL_IB_HCA
/// set to mlx5_0`, nccl-tests#228).
pub(super) fn env_setting(body: &str) -> Option<(&str, &str)> {
    let (var, value) = body
        .split_once(" set by environment to ")
        .or_else(|| body.split_once(" set to "))?;
    let var = var.split_whitespace().last()?;
    let value = value.trim().trim_end_matches('.').trim();
    var.starts_with("NCCL_").then_some((var, value))
}

/// Whether a `via` text says GPUDirect RDMA (`NET/IB/0/GDRDMA/Shared`),
/// whatever follows the word (a log viewer's frame: `GDRDMA    │`).
pub(super) fn parts_have_gdr(via: &str) -> bool {
    via.split('/')
        .any(|p| p.split_whitespace().next() == Some("GDRDMA"))
}

/// `0[0]`, `12[1b000]`, `3` -> the rank.
pub(super) fn rank_of(token: &str) -> Option<u64> {
    let digits: String = token.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The byte offset just past `needle` in `hay`, compared without case.
pub(super) fn lower_find(hay: &str, needle: &str) -> Option<usize> {
    hay.to_ascii_lowercase()
        .find(needle)
        .map(|at| at + needle.len())
}
