//! NCCL's INFO lines, one at a time, into an [`NcclPath`]. Each handler
//! reads one shape of line; the shapes are quoted from real logs (NCCL 2.4
//! to 2.28) in the tests.

use super::lines::{
    bare_body, coll_channels, env_setting, is_version, lower_find, nccl_body, net_trace,
    nvls_channels, parts_have_gdr, rank_of, ring_channels, unescape_html, version_of,
};
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
    /// Lines tagged `NCCL INFO`/`NCCL WARN` read.
    tagged: u64,
    /// NCCL's messages pasted with their prefix cut (`Using network IB`),
    /// read apart: they stand for the log only when it holds NCCL's
    /// version line and no tagged line at all.
    bare: Option<Box<Reader>>,
    /// The line just read, when it was a network plugin's (`NET/OFI ...`):
    /// the error trace that may follow names that plugin as failed.
    prev_net: Option<(String, String)>,
    /// Plugins whose initialisation returned an error, with their last line.
    failed_plugins: Vec<(String, String)>,
    /// Environment settings already taken as causes: NCCL 2.28 prints a
    /// NIC choice twice (`NCCL_SOCKET_IFNAME set by environment to lo`,
    /// then `NCCL_SOCKET_IFNAME set to lo`), one cause is enough.
    env_seen: BTreeSet<(String, String)>,
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
        match nccl_body(line) {
            Some((body, tagged)) => {
                self.tagged += u64::from(tagged);
                self.body(&unescape_html(body));
            }
            None => {
                if let Some(body) = bare_body(line) {
                    let bare = self.bare.get_or_insert_with(Box::default);
                    bare.body(&unescape_html(body));
                }
            }
        }
    }

    /// Reads NCCL's text of one line (after its tag).
    fn body(&mut self, body: &str) {
        self.path.nccl_lines += 1;
        let prev_net = self.prev_net.take();
        if is_version(body) {
            if self.path.version.is_none() {
                self.path.version = version_of(body);
            }
            return;
        }
        if net_trace(body) {
            if let Some(failed) = prev_net {
                if self.failed_plugins.len() < MAX_CAUSES {
                    self.failed_plugins.push(failed);
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
        // RCCL ends its lines with the communicator: `via P2P/IPC comm
        // 0xfb16e30 nRanks 08`.
        let via = via.split(" comm 0x").next().unwrap_or(via).trim();
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
        self.prev_net = Some((normalise_net(&plugin), body.to_string()));
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
        if !self.env_seen.insert((var.to_string(), value.to_string())) {
            return;
        }
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
        // NCCL's verbs wrapper, before the IB plugin lists anything (2.5's
        // WARN, RCCL's INFO): no IB device can be used.
        if body.contains("Failed to open libibverbs") {
            self.cause(CauseKind::NoIbDevice, body);
            return;
        }
        // p2p.cc's answer when cudaDeviceCanAccessPeer says no (or fails).
        if body.starts_with("Could not enable P2P between dev")
            || body.starts_with("peer query failed between dev")
        {
            self.cause(CauseKind::P2pUnavailable, body);
            return;
        }
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
        if self.tagged == 0 && self.path.version.is_some() {
            if let Some(bare) = self.bare.take() {
                let (version, lines) = (self.path.version.take(), self.path.nccl_lines);
                let mut path = bare.finish()?;
                path.version = path.version.or(version);
                path.nccl_lines = path.nccl_lines.saturating_add(lines);
                return Some(path);
            }
        }
        self.path.net = self
            .net_via
            .take()
            .or(self.net_using.take())
            .or(self.net_listed.take());
        // A plugin that failed and is not the one in use: why NCCL fell
        // back (aws-ofi-nccl failing, NCCL's own IB taking over).
        for (plugin, line) in std::mem::take(&mut self.failed_plugins) {
            let used = self.path.net.as_deref().unwrap_or("");
            if !used.starts_with(plugin.as_str()) {
                self.cause(CauseKind::PluginMissing, &line);
            }
        }
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

/// `IPC`, `CUMEM`, `direct pointer` -> `IPC`, `CUMEM`, `direct`: the
/// first word, whatever a log viewer left after it.
fn p2p_kind(word: &str) -> String {
    word.split_whitespace().next().unwrap_or("").to_string()
}
