//! What `collbench compare` compares: a line per side naming the tool and
//! versions, ranks, hosts and GPU model, and warnings where the two sides
//! differ in ways that change what the figures mean.

use crate::render::environment;
use collbench_core::nccl_path::NcclPath;
use collbench_core::Record;
use std::collections::BTreeSet;

/// The distinct environments of one side, each field joined over records.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    pub tool: String,
    pub library: String,
    pub ranks: BTreeSet<u64>,
    pub hosts: String,
    pub devices: BTreeSet<String>,
    /// The path NCCL took, joined over the side's records that carry one.
    pub nccl_path: Option<NcclPath>,
}

/// Summarises the records of one side.
pub fn side(records: &[Record]) -> Side {
    let join = |f: &dyn Fn(&Record) -> String| {
        let mut v: Vec<String> = Vec::new();
        for r in records {
            let s = f(r);
            if s != "-" && !v.contains(&s) {
                v.push(s);
            }
        }
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(" / ")
        }
    };
    Side {
        tool: join(&|r| environment(r).tool),
        library: join(&|r| environment(r).library),
        ranks: records
            .iter()
            .map(|r| r.settings.world_size)
            .filter(|n| *n > 0)
            .collect(),
        hosts: join(&|r| environment(r).hosts),
        devices: records
            .iter()
            .flat_map(|r| &r.devices)
            .map(|d| d.name.clone())
            .filter(|n| !n.is_empty())
            .collect(),
        nccl_path: records
            .iter()
            .filter_map(|r| r.nccl_path.clone())
            .reduce(|mut a, b| {
                a.merge(b);
                a
            }),
    }
}

/// A change of NCCL's path between the sides, the first suspect for any
/// change of speed: `network IB -> Socket (BASE NET/IB ...; NEW NET/Socket ...)`.
pub fn path_change(base: &Side, new: &Side) -> Option<String> {
    let (Some(b), Some(n)) = (&base.nccl_path, &new.nccl_path) else {
        return None;
    };
    let d = collbench_core::nccl_path::differences(b, n);
    (!d.is_empty()).then(|| {
        format!(
            "{} (BASE {}; NEW {})",
            d.join("; "),
            b.summary(),
            n.summary()
        )
    })
}

fn list<T: ToString>(set: &BTreeSet<T>) -> String {
    if set.is_empty() {
        "-".to_string()
    } else {
        set.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
    }
}

/// `BASE base.txt: nccl-tests 2.19.6, NCCL 2.28.3, 2 ranks, hosts h1, NVIDIA H200`.
pub fn header_line(role: &str, name: &str, s: &Side) -> String {
    format!(
        "{role} {name}: {}, {}, {} rank(s), hosts {}, GPU {}",
        s.tool,
        s.library,
        list(&s.ranks),
        s.hosts,
        list(&s.devices)
    )
}

/// Warnings about differences between the sides that change what the
/// figures mean: NCCL's path first, then rank counts and GPU models.
pub fn warnings(base: &Side, new: &Side) -> Vec<String> {
    let mut out: Vec<String> = path_change(base, new)
        .map(|c| {
            format!("warning: NCCL's path changed (first suspect for any change of speed): {c}")
        })
        .into_iter()
        .collect();
    if !base.ranks.is_empty() && !new.ranks.is_empty() && base.ranks != new.ranks {
        out.push(format!(
            "warning: rank counts differ (BASE {}, NEW {}): time and algbw are not comparable \
             across rank counts, and busbw only roughly",
            list(&base.ranks),
            list(&new.ranks)
        ));
    }
    if !base.devices.is_empty() && !new.devices.is_empty() && base.devices != new.devices {
        out.push(format!(
            "warning: GPU models differ (BASE {}, NEW {})",
            list(&base.devices),
            list(&new.devices)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::DeviceInfo;

    fn rec(ranks: u64, gpu: &str) -> Record {
        let mut r = Record::new("nccl-tests");
        r.settings.world_size = ranks;
        r.devices = (0..ranks)
            .map(|k| DeviceInfo {
                rank: k,
                host: "h".into(),
                name: gpu.into(),
                ..DeviceInfo::default()
            })
            .collect();
        r
    }

    #[test]
    fn differing_ranks_and_gpus_warn() {
        let (a, b) = (
            side(&[rec(2, "NVIDIA H200")]),
            side(&[rec(8, "NVIDIA H100")]),
        );
        let w = warnings(&a, &b);
        assert!(w[0].contains("rank counts differ (BASE 2, NEW 8)"), "{w:?}");
        assert!(w[1].contains("GPU models differ"), "{w:?}");
        assert!(header_line("BASE", "a.txt", &a).contains("2 rank(s), hosts h, GPU NVIDIA H200"));
        assert!(warnings(&a, &a).is_empty());
    }

    #[test]
    fn a_change_of_nccl_path_is_the_first_warning() {
        let mut a = rec(16, "NVIDIA H100 80GB HBM3");
        let mut b = a.clone();
        a.nccl_path = NcclPath::from_text(
            "h:1:1 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA\n",
        );
        b.nccl_path = NcclPath::from_text(
            "h:1:1 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/Socket/0\n",
        );
        let w = warnings(&side(&[a.clone()]), &side(&[b]));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("warning: NCCL's path changed (first suspect for any change of speed): network IB -> Socket; GPUDirect RDMA on -> off"),
            "{}",
            w[0]
        );
        assert!(warnings(&side(&[a.clone()]), &side(&[a])).is_empty());
    }
}
