//! NCCL's INFO lines, one at a time, into an [`NcclPath`]. Each handler
//! reads one shape of line; the shapes are quoted from real logs (NCCL 2.4
//! to 2.28) in the tests.

use super::{Cause, CauseKind, NcclPath, PairPath, Transport, MAX_CAUSES, MAX_PAIRS};
use std::collections::{BTreeMap, BTreeSet};

/// NICs kept from NCCL's device list lines.
const MAX_NICS: usize = 64;

/// Evidence kept per cause, in characters.
const EVIDENCE_CHARS: usize = 200;

/// Accumulates facts over lines; [`Reader::finish`] settles them.
#[derive(Default)]
pub(super) struct Reader {
    path: NcclPath,
    pairs: BTreeSet<PairPath>,
    causes: BTreeSet<Cause>,
    /// The network named by a NET connection (`via NET/IB/0`): the surest.
    net_via: Option<String>,
    /// The network named by `Using network X`.
    net_using: Option<String>,
    /// The plugin of the last NIC list (`NET/IB : Using [0]mlx5_0:1/IB`).
    net_listed: Option<String>,
    net_connections: bool,
    gdr_connections: bool,
    /// The largest `N coll channels` seen (NCCL 2.12 and later).
    coll_channels: Option<u64>,
    /// The largest count of the ring lines (`Channel 00/04 :    0   1`).
    ring_channels: Option<u64>,
    /// NICs and link layers each plugin listed: NCCL 2.4-2.6 list the
    /// socket plugin's interfaces too, even when IB carries the traffic.
    listed: BTreeMap<String, Listed>,
}

/// What one network plugin said it uses.
#[derive(Default)]
struct Listed {
    nics: Vec<String>,
    link_layers: BTreeSet<String>,
}

impl Reader {
    /// Reads one line of a log (any line: non-NCCL lines are skipped).
    pub(super) fn line(&mut self, line: &str) {
        let Some(body) = nccl_body(line) else {
            return;
        };
        self.path.nccl_lines += 1;
        if let Some(v) = body.split("NCCL version ").nth(1) {
            if self.path.version.is_none() {
                let v: String = v
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                if !v.is_empty() {
                    self.path.version = Some(v);
                }
            }
            return;
        }
        if let Some(rest) = body.strip_prefix("Using network ") {
            self.net_using = Some(normalise_net(rest.trim()));
        } else if body.contains(" via ") && (body.contains("->") || body.starts_with("CollNet ")) {
            self.channel(body);
        } else if body.starts_with("NET/") {
            self.net_line(body);
        } else if let Some((var, value)) = env_setting(body) {
            self.env(var, value, body);
        } else {
            self.other(body);
        }
    }

    /// `Channel 00/0 : 0[0] -> 1[1] [receive] via NET/IB/0(1)/GDRDMA`,
    /// `Ring 00 : 0 -> 1 via P2P/IPC`.
    fn channel(&mut self, body: &str) {
        let Some((head, via)) = body.split_once(" via ") else {
            return;
        };
        let via = via.trim();
        let Some(transport) = Transport::from_via(via) else {
            return;
        };
        let (from, to) = match head.rsplit_once("->") {
            Some((left, right)) => (
                left.split_whitespace().last().and_then(rank_of),
                right.split_whitespace().next().and_then(rank_of),
            ),
            None => (None, None),
        };
        self.path.transports.insert(transport);
        if parts_have_gdr(via) && matches!(transport, Transport::Net | Transport::CollNet) {
            self.gdr_connections = true;
        }
        let parts: Vec<&str> = via.split('/').collect();
        match transport {
            Transport::P2p => {
                if let Some(kind) = parts.get(1) {
                    self.path.p2p_kinds.insert(p2p_kind(kind));
                }
            }
            Transport::Net => {
                self.net_connections = true;
                if let Some(plugin) = parts.get(1) {
                    self.net_via = Some(normalise_net(plugin));
                }
                // `NET/IB/0(1)`: the NIC of another GPU, reached through it.
                if parts.get(2).is_some_and(|p| p.contains('(')) {
                    self.path.pxn = true;
                }
            }
            Transport::Nvls => self.path.nvls = Some(true),
            Transport::Shm | Transport::CollNet => {}
        }
        if let (Some(from), Some(to)) = (from, to) {
            if self.pairs.len() < MAX_PAIRS {
                self.pairs.insert(PairPath {
                    from,
                    to,
                    transport,
                    via: via.chars().take(EVIDENCE_CHARS).collect(),
                });
            } else {
                self.path.pairs_truncated = true;
            }
        }
    }

    /// `NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>`,
    /// `NET/Socket : Using [0]eth0:10.0.0.1<0>`, `NET/IB : No device found.`,
    /// `NET/OFI Selected Provider is efa (found 4 nics)`, `NET/Plugin: ...`.
    fn net_line(&mut self, body: &str) {
        let after = &body[4..];
        let plugin: String = after
            .chars()
            .take_while(|c| !matches!(c, ' ' | ':' | '/'))
            .collect();
        if plugin.eq_ignore_ascii_case("Plugin") {
            self.plugin_line(body);
            return;
        }
        if body.contains("No device found") || body.contains("libibverbs") {
            self.cause(CauseKind::NoIbDevice, body);
            return;
        }
        let plugin = normalise_net(&plugin);
        if let Some(p) = lower_find(body, "selected provider is ") {
            let provider: String = body[p..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ';'))
                .collect();
            let listed = self.listed.entry(plugin.clone()).or_default();
            if !provider.is_empty() {
                listed.link_layers.insert(provider);
            }
            self.net_listed = Some(plugin);
            return;
        }
        if body.contains("initialization failed") {
            self.cause(CauseKind::PluginMissing, body);
            return;
        }
        // `NET/IB : Using [0]mlx5_0:1/IB ...`, `NET/IB: [0] mlx5_0:uverbs0:1/RoCE provider=...`
        let list = match body.split_once(" Using ") {
            Some((_, list)) => Some(list),
            None => body.split_once(':').map(|(_, rest)| rest).filter(|rest| {
                rest.trim_start().starts_with("[0]") || rest.trim_start().starts_with('[')
            }),
        };
        if let Some(list) = list {
            let nics = nic_list(list.split(';').next().unwrap_or(""));
            if !nics.is_empty() {
                let listed = self.listed.entry(plugin.clone()).or_default();
                for (nic, layer) in nics {
                    if listed.nics.len() < MAX_NICS && !listed.nics.contains(&nic) {
                        listed.nics.push(nic);
                    }
                    if let Some(layer) = layer {
                        listed.link_layers.insert(layer);
                    }
                }
                self.net_listed = Some(plugin);
            }
        }
        if body.contains("GPU Direct RDMA Disabled") {
            self.cause(CauseKind::GdrDisabled, body);
        }
    }

    /// `NET/Plugin : No plugin found (libnccl-net.so), using internal implementation`,
    /// `NET/Plugin: Failed to find ncclNetPlugin_v6 symbol`, `NET/Plugin: Loaded net plugin Libfabric (v8)`.
    fn plugin_line(&mut self, body: &str) {
        let lower = body.to_ascii_lowercase();
        let failed = [
            "no plugin found",
            "could not find",
            "failed",
            "dlerror",
            "cannot open",
        ]
        .iter()
        .any(|w| lower.contains(w));
        if failed {
            self.cause(CauseKind::PluginMissing, body);
        }
    }

    /// `NCCL_IB_DISABLE set by environment to 1.`
    fn env(&mut self, var: &str, value: &str, body: &str) {
        let off = matches!(value, "0" | "LOC" | "loc");
        let on = value == "1";
        let kind = match var {
            "NCCL_IB_DISABLE" if on => CauseKind::IbDisabled,
            "NCCL_NET" => CauseKind::NetForced,
            "NCCL_P2P_DISABLE" if on => CauseKind::P2pDisabled,
            "NCCL_P2P_LEVEL" if off => CauseKind::P2pDisabled,
            "NCCL_SHM_DISABLE" if on => CauseKind::ShmDisabled,
            "NCCL_NVLS_ENABLE" if value == "0" => CauseKind::NvlsDisabled,
            "NCCL_NET_GDR_LEVEL" if off => CauseKind::GdrDisabled,
            "NCCL_IB_HCA" | "NCCL_SOCKET_IFNAME" | "NCCL_CROSS_NIC" => CauseKind::NicChoice,
            "NCCL_MAX_NCHANNELS" | "NCCL_MAX_CTAS" => CauseKind::ChannelsCapped,
            _ => return,
        };
        self.cause(kind, body);
    }

    /// NVLS, CollNet, GDR and channel-count lines without a fixed prefix.
    fn other(&mut self, body: &str) {
        if let Some(n) = coll_channels(body) {
            self.coll_channels = self.coll_channels.max(Some(n));
        } else if let Some(n) = ring_channels(body) {
            self.ring_channels = self.ring_channels.max(Some(n));
        }
        if body.contains("NVLS multicast support is not available") {
            if self.path.nvls.is_none() {
                self.path.nvls = Some(false);
            }
            self.cause(CauseKind::NvlsDisabled, body);
        } else if body.contains("NVLS multicast support is available")
            || body.starts_with("Connected NVLS")
            || body.starts_with("NVLS comm")
        {
            self.path.nvls = Some(true);
        } else if let Some(n) = nvls_channels(body) {
            // `24 coll channels, 24 collnet channels, 0 nvls channels, ...`
            if n > 0 {
                self.path.nvls = Some(true);
            } else if self.path.nvls.is_none() {
                self.path.nvls = Some(false);
            }
        } else if body.starts_with("Connected CollNet") || body.contains("CollNet channel") {
            self.path.transports.insert(Transport::CollNet);
        } else if body.contains("GPU Direct RDMA Disabled") {
            self.cause(CauseKind::GdrDisabled, body);
        }
    }

    fn cause(&mut self, kind: CauseKind, body: &str) {
        if self.causes.len() < MAX_CAUSES {
            self.causes.insert(Cause {
                kind,
                evidence: body.chars().take(EVIDENCE_CHARS).collect(),
            });
        }
    }

    /// Settles the facts; `None` when no NCCL line was read.
    pub(super) fn finish(mut self) -> Option<NcclPath> {
        if self.path.nccl_lines == 0 {
            return None;
        }
        self.path.net = self.net_via.or(self.net_using).or(self.net_listed);
        // The plugin that carried traffic; an external build of IB
        // (`IBext_v8`, the SHARP plugin) lists its NICs as `NET/IB`.
        let listed = self.path.net.as_ref().and_then(|net| {
            let key = self
                .listed
                .keys()
                .find(|k| *k == net)
                .or_else(|| self.listed.keys().find(|k| net.starts_with(k.as_str())))
                .cloned()?;
            self.listed.remove(&key)
        });
        if let Some(listed) = listed {
            self.path.nics = listed.nics;
            self.path.link_layers = listed.link_layers;
        }
        if self.net_connections || self.gdr_connections {
            self.path.gdr = Some(self.gdr_connections);
        }
        self.path.channels = self.coll_channels.or(self.ring_channels);
        self.path.pairs = self.pairs.into_iter().collect();
        self.path.causes = self.causes.into_iter().collect();
        Some(self.path)
    }
}

/// The text after `NCCL INFO `/`NCCL WARN ` (or a bare `NCCL version`
/// line's), whatever launcher tags, host names and timestamps stand before.
fn nccl_body(line: &str) -> Option<&str> {
    for tag in ["NCCL INFO ", "NCCL WARN "] {
        if let Some(at) = line.find(tag) {
            return Some(line[at + tag.len()..].trim());
        }
    }
    let at = line.find("NCCL version ")?;
    Some(line[at..].trim())
}

/// `2 coll channels, 0 nvls channels, 2 p2p channels` -> 0.
fn nvls_channels(body: &str) -> Option<u64> {
    let (before, _) = body.split_once(" nvls channels")?;
    before.split_whitespace().last()?.parse().ok()
}

/// `24 coll channels, 0 nvls channels, 32 p2p channels, ...` -> 24.
fn coll_channels(body: &str) -> Option<u64> {
    let (count, _) = body.split_once(" coll channels")?;
    count.trim().parse().ok()
}

/// `Channel 00/04 :    0   1   2   3` (a ring, NCCL 2.7 and later) -> 4.
/// Connection lines (`Channel 00/0 : 0[0] -> 1[1] via P2P`) carry the
/// connection index there instead, and are read elsewhere.
fn ring_channels(body: &str) -> Option<u64> {
    let rest = body.strip_prefix("Channel ")?;
    let (ids, ranks) = rest.split_once(':')?;
    if ranks.contains("->") || ranks.contains(" via ") {
        return None;
    }
    let (_, count) = ids.trim().split_once('/')?;
    count.trim().parse().ok()
}

/// `NCCL_IB_DISABLE set by environment to 1.` -> (`NCCL_IB_DISABLE`, `1`).
fn env_setting(body: &str) -> Option<(&str, &str)> {
    let (var, value) = body.split_once(" set by environment to ")?;
    let var = var.split_whitespace().last()?;
    let value = value.trim().trim_end_matches('.').trim();
    var.starts_with("NCCL_").then_some((var, value))
}

/// Whether a `via` text says GPUDirect RDMA (`NET/IB/0/GDRDMA/Shared`).
fn parts_have_gdr(via: &str) -> bool {
    via.split('/').any(|p| p.trim() == "GDRDMA")
}

/// `0[0]`, `12[1b000]`, `3` -> the rank.
fn rank_of(token: &str) -> Option<u64> {
    let digits: String = token.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The NICs of a plugin's list, with their link layers:
/// `[0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]`, the merged form
/// `[0]={[0] mlx5_2:1/RoCE, [1] mlx5_3:1/RoCE}`, the 2.27 form
/// `[0] mlx5_0:uverbs0:1/RoCE provider=Mlx5`, sockets' `[0]eth0:10.0.0.1<0>`.
fn nic_list(list: &str) -> Vec<(String, Option<String>)> {
    let spaced: String = list
        .chars()
        .map(|c| {
            if matches!(c, '{' | '}' | ',' | '=') {
                ' '
            } else {
                c
            }
        })
        .collect();
    let mut out = Vec::new();
    let mut after_index = false;
    for token in spaced.split_whitespace() {
        let name = match token.strip_prefix('[') {
            Some(rest) => match rest.split_once(']') {
                Some((index, name))
                    if !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) =>
                {
                    if name.is_empty() {
                        after_index = true;
                        continue;
                    }
                    name
                }
                _ => continue,
            },
            None if after_index => token,
            None => continue,
        };
        after_index = false;
        if name.contains('=') {
            continue;
        }
        out.push(nic_name(name));
    }
    out
}

/// `mlx5_0:1/IB` -> (`mlx5_0:1`, `IB`); `mlx5_0:uverbs0:1/RoCE` ->
/// (`mlx5_0:1`, `RoCE`); `eth0:10.0.0.1<0>` -> (`eth0`, none).
fn nic_name(name: &str) -> (String, Option<String>) {
    match name.split_once('/') {
        Some((nic, layer)) => {
            let layer: String = layer
                .chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect();
            let parts: Vec<&str> = nic.split(':').collect();
            let nic = match parts[..] {
                [dev, verbs, port] if verbs.starts_with("uverbs") => format!("{dev}:{port}"),
                _ => nic.to_string(),
            };
            (nic, (!layer.is_empty()).then_some(layer))
        }
        None => (name.split(':').next().unwrap_or(name).to_string(), None),
    }
}

/// NCCL's names for plugins, as `--require-transport` and the record use them.
pub(super) fn normalise_net(name: &str) -> String {
    let name = name.trim();
    let lower = name.to_ascii_lowercase();
    if lower.contains("libfabric") || lower == "ofi" || lower.starts_with("aws ofi") {
        "OFI".into()
    } else if lower == "ib" {
        "IB".into()
    } else if lower == "socket" {
        "Socket".into()
    } else {
        name.to_string()
    }
}

/// `IPC`, `CUMEM`, `direct pointer` -> `IPC`, `CUMEM`, `direct`.
fn p2p_kind(word: &str) -> String {
    let word = word.trim();
    if word.starts_with("direct") {
        "direct".into()
    } else {
        word.to_string()
    }
}

/// The byte offset just past `needle` in `hay`, compared without case.
fn lower_find(hay: &str, needle: &str) -> Option<usize> {
    hay.to_ascii_lowercase()
        .find(needle)
        .map(|at| at + needle.len())
}
