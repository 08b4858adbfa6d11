//! GPUs joined point to point without a switch: DGX-1's hybrid cube mesh,
//! 4-GPU HGX boards, NVLink-bridged PCIe pairs, AMD Instinct boards'
//! Infinity Fabric. Where the topology says which links join which pair
//! (`[gpu] peer_links`), a GPU reaches a peer only over the links to that
//! peer, so what one pair, a ring and a GPU's fan-out carry is bounded by
//! the links each pair has, not by all of a GPU's links (docs/ceiling.md,
//! "GPUs joined without a switch").

use crate::bound::{gb, Bound};
use crate::links::{gpu_link_share, pcie_payload_gbps};
use collbench_core::{Bottleneck, Collective, Topology};

/// GPUs up to which every split of them is tried for the ring bound
/// (2^12 splits); past it each GPU alone is (its own links).
const MAX_CUT_GPUS: usize = 12;

/// What traffic an op puts on the links inside a host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Traffic {
    /// Rings (and the chains of trees): each enters and leaves every GPU once.
    Ring,
    /// nccl-tests' sendrecv: rank r sends to r+1 and receives from r-1.
    Pairs,
    /// A GPU sends to every peer at once (alltoall, a root's gather/scatter).
    FanOut,
}

impl Traffic {
    /// The traffic of `op`'s large-size algorithms.
    pub(crate) fn of(op: Collective) -> Traffic {
        match op {
            Collective::SendRecv => Traffic::Pairs,
            Collective::AllToAll
            | Collective::AllToAllV
            | Collective::HyperCube
            | Collective::Gather
            | Collective::Scatter => Traffic::FanOut,
            Collective::AllReduce
            | Collective::AllGather
            | Collective::ReduceScatter
            | Collective::Broadcast
            | Collective::Reduce => Traffic::Ring,
        }
    }
}

/// The payload rates between the first `n` GPUs of a host whose GPUs are
/// joined point to point.
#[derive(Debug, Clone)]
pub(crate) struct Mesh {
    /// GB/s a direction between GPU i and GPU j over their own links (0: none).
    cap: Vec<Vec<f64>>,
    /// A GPU's PCIe payload rate, which pairs without a link share.
    pcie: Option<f64>,
    /// The part the links are (NVLink, Infinity Fabric).
    via: Bottleneck,
    /// How one link's payload rate was reached, for a `why`.
    per_link: String,
}

impl Mesh {
    /// The mesh of a topology's first `ranks` GPUs, where it gives
    /// `peer_links` for at least that many, no switch, and a link rate.
    pub(crate) fn of(topo: &Topology, ranks: u64) -> Option<Mesh> {
        let g = topo.gpu.as_ref()?;
        let n = usize::try_from(ranks).ok()?;
        if g.nvswitch == Some(true) || n < 2 || g.peer_links.len() < n {
            return None;
        }
        let rate = g.nvlink_link_gbps.filter(|r| *r > 0.0)?;
        let (share, via, why) = gpu_link_share(topo);
        let cap = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        let links = g.peer_links[i].get(j).copied().unwrap_or(0);
                        links as f64 * rate * share
                    })
                    .collect()
            })
            .collect();
        let pcie = match (g.pcie_generation, g.pcie_width) {
            (Some(gen), Some(w)) => pcie_payload_gbps(gen, w),
            _ => None,
        };
        Some(Mesh {
            cap,
            pcie,
            via,
            per_link: format!("{rate} GB/s a link x {why}"),
        })
    }

    /// The bound of `traffic` over the mesh; `None` where a pair has no
    /// link and the PCIe rate is unknown.
    pub(crate) fn bound(&self, traffic: Traffic) -> Option<Bound> {
        match traffic {
            Traffic::Ring => self.ring(),
            Traffic::Pairs => self.pairs(),
            Traffic::FanOut => self.fan_out(),
        }
    }

    fn n(&self) -> usize {
        self.cap.len()
    }

    /// What crosses from the GPUs in `set` (a bit mask) to the others:
    /// their links to the others, plus the PCIe link of each that has a
    /// peer outside with no link. `None` where that PCIe rate is unknown.
    /// Returns (GB/s, of which over GPU links).
    fn cut(&self, set: u64) -> Option<(f64, f64)> {
        let inside = |i: usize| (set >> i) & 1 == 1;
        let (mut links, mut pcie) = (0.0, 0.0);
        for i in (0..self.n()).filter(|&i| inside(i)) {
            let out: Vec<usize> = (0..self.n()).filter(|&j| !inside(j)).collect();
            links += out.iter().map(|&j| self.cap[i][j]).sum::<f64>();
            if out.iter().any(|&j| self.cap[i][j] == 0.0) {
                pcie += self.pcie?;
            }
        }
        Some((links + pcie, links))
    }

    /// Each ring of each channel enters and leaves every GPU once over a
    /// link it has (NCCL's search, src/graph/search.cc, follows GPU-to-GPU
    /// paths and falls back to PCIe where a pair has none), so the rings
    /// together carry across any split of the GPUs at most what crosses
    /// it: busbw <= the narrowest split. A GPU alone is its own links.
    fn ring(&self) -> Option<Bound> {
        let n = self.n();
        let sets: Vec<u64> = if n <= MAX_CUT_GPUS {
            (1..(1u64 << n) - 1).collect()
        } else {
            (0..n).map(|i| 1u64 << i).collect()
        };
        let mut best: Option<(f64, f64, u64)> = None;
        for set in sets {
            let Some((total, links)) = self.cut(set) else {
                continue;
            };
            if best.is_none_or(|(b, _, _)| total < b) {
                best = Some((total, links, set));
            }
        }
        let (total, links, set) = best?;
        let gpus: Vec<String> = (0..n)
            .filter(|i| (set >> i) & 1 == 1)
            .map(|i| i.to_string())
            .collect();
        Some(Bound {
            gbps: total,
            by: self.by(links),
            why: format!(
                "rings over GPUs joined without a switch: each ring enters and leaves every GPU once over a link it has (PCIe where a pair has none), so the rings carry across any split of the GPUs at most the links across it: busbw <= the narrowest split, GPU {} to the rest, {} GB/s ({} of it over {} links, {})",
                gpus.join(", "),
                gb(round1(total)),
                gb(round1(links)),
                self.via.label(),
                self.per_link
            ),
        })
    }

    /// What one GPU can send to one peer: its own links to it, or where it
    /// has none the better of PCIe and a two-hop path through a GPU both
    /// reach (NCCL's PATH_NVB, src/graph/paths.cc); `None` where it has
    /// none and PCIe is unknown.
    fn pair(&self, i: usize, j: usize) -> Option<(f64, bool)> {
        if self.cap[i][j] > 0.0 {
            return Some((self.cap[i][j], true));
        }
        let hop = (0..self.n())
            .map(|k| self.cap[i][k].min(self.cap[k][j]))
            .fold(0.0, f64::max);
        // With PCIe unknown NCCL may route there at a rate no bound knows.
        let p = self.pcie?;
        Some(if p >= hop { (p, false) } else { (hop, true) })
    }

    /// nccl-tests' sendrecv moves each rank's bytes to the next rank:
    /// busbw <= the slowest such pair.
    fn pairs(&self) -> Option<Bound> {
        let n = self.n();
        let mut slowest: Option<(f64, bool, usize)> = None;
        for i in 0..n {
            let (gbps, linked) = self.pair(i, (i + 1) % n)?;
            if slowest.is_none_or(|(s, _, _)| gbps < s) {
                slowest = Some((gbps, linked, i));
            }
        }
        let (gbps, linked, i) = slowest?;
        let by = if linked { self.via } else { Bottleneck::Pcie };
        Some(Bound {
            gbps,
            by,
            why: format!(
                "sendrecv over GPUs joined without a switch: rank r sends to rank r+1 over the links between them only (a peer without one through PCIe or a GPU both reach): busbw <= the slowest pair, GPU {i} to GPU {}, {} GB/s over {} ({})",
                (i + 1) % n,
                gb(round1(gbps)),
                by.label(),
                self.per_link
            ),
        })
    }

    /// A GPU sending to every peer at once sends at most its own links'
    /// and, where some peer has no link, its PCIe link's rate.
    fn fan_out(&self) -> Option<Bound> {
        let (total, links, i) = (0..self.n())
            .filter_map(|i| self.cut(1 << i).map(|(t, l)| (t, l, i)))
            .min_by(|a, b| a.0.total_cmp(&b.0))?;
        Some(Bound {
            gbps: total,
            by: self.by(links),
            why: format!(
                "a GPU sends to every peer at once over its own links to them (PCIe where a pair has none): busbw <= GPU {i}'s {} GB/s ({} of it over {} links, {})",
                gb(round1(total)),
                gb(round1(links)),
                self.via.label(),
                self.per_link
            ),
        })
    }

    /// The part a bound names: the links where any carry it, else PCIe.
    fn by(&self, links: f64) -> Bottleneck {
        if links > 0.0 {
            self.via
        } else {
            Bottleneck::Pcie
        }
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
#[path = "mesh_tests.rs"]
pub(crate) mod tests;
