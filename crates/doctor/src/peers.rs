//! Which GPUs each GPU's NVLinks reach, for the ceiling of GPUs joined
//! without a switch (a DGX-1, a 4-GPU HGX board, NVLink-bridged PCIe
//! cards): NVML names every active link's far end by its PCI bus id, so
//! counting the links that end at each other GPU gives `nvidia-smi topo
//! -m`'s NV# matrix ([`collbench_core::GpuTopology::peer_links`]).

/// Links from each GPU to each other GPU: `buses[i]` is GPU i's PCI bus
/// id and `remotes[i]` the far ends of its active links. `None` where the
/// matrix would mislead the ceiling: a link that ends at no GPU of the host
/// (an NVSwitch: every pair is then at full rate), no link up at all, a
/// GPU NVML could not list, or counts the two ends disagree on.
pub fn peer_matrix(buses: &[String], remotes: &[Vec<String>]) -> Option<Vec<Vec<u32>>> {
    let n = buses.len();
    if n < 2 || remotes.len() != n {
        return None;
    }
    let index = |bus: &str| buses.iter().position(|b| b.eq_ignore_ascii_case(bus));
    let mut m = vec![vec![0u32; n]; n];
    for (i, ends) in remotes.iter().enumerate() {
        for end in ends {
            let j = index(end)?;
            if j == i {
                return None;
            }
            m[i][j] += 1;
        }
    }
    let any = m.iter().flatten().any(|&l| l > 0);
    let symmetric = (0..n).all(|i| (0..n).all(|j| m[i][j] == m[j][i]));
    (any && symmetric).then_some(m)
}

/// The matrix as `nvidia-smi topo -m` would show its pairs, for
/// doctor's line: `0-1 NV12, 2 PCIe only`.
pub fn pairs_words(m: &[Vec<u32>]) -> String {
    let mut words: Vec<String> = Vec::new();
    for (i, row) in m.iter().enumerate() {
        for (j, &links) in row.iter().enumerate().skip(i + 1) {
            if links > 0 {
                words.push(format!("{i}-{j} NV{links}"));
            }
        }
    }
    let alone: Vec<String> = (0..m.len())
        .filter(|&i| m[i].iter().all(|&l| l == 0))
        .map(|i| i.to_string())
        .collect();
    if !alone.is_empty() {
        words.push(format!("{} PCIe only", alone.join(", ")));
    }
    words.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buses(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("00000000:{:02X}:00.0", 0x10 + i))
            .collect()
    }

    fn ends(b: &[String], to: &[(usize, usize)]) -> Vec<String> {
        to.iter()
            .flat_map(|&(j, links)| std::iter::repeat_n(b[j].to_lowercase(), links))
            .collect()
    }

    #[test]
    fn a_bridged_pair_and_a_pcie_only_gpu() {
        // Three A100 PCIe: GPUs 0 and 1 share 12 bridge links, GPU 2 none
        // (NVIDIA/nccl-tests#178's `nvidia-smi topo -m`).
        let b = buses(3);
        let remotes = vec![ends(&b, &[(1, 12)]), ends(&b, &[(0, 12)]), vec![]];
        let m = peer_matrix(&b, &remotes).unwrap();
        assert_eq!(m, vec![vec![0, 12, 0], vec![12, 0, 0], vec![0, 0, 0]]);
        assert_eq!(pairs_words(&m), "0-1 NV12, 2 PCIe only");
    }

    #[test]
    fn a_four_gpu_board_with_six_links_to_each_peer() {
        let b = buses(4);
        let remotes: Vec<Vec<String>> = (0..4)
            .map(|i| {
                let peers: Vec<(usize, usize)> =
                    (0..4).filter(|&j| j != i).map(|j| (j, 6)).collect();
                ends(&b, &peers)
            })
            .collect();
        let m = peer_matrix(&b, &remotes).unwrap();
        assert!((0..4).all(|i| m[i][i] == 0 && m[i].iter().sum::<u32>() == 18));
    }

    #[test]
    fn a_switch_no_link_or_disagreeing_ends_give_no_matrix() {
        let b = buses(2);
        // A link to an NVSwitch (a bus that is no GPU of the host).
        let switch = vec![vec!["00000000:c7:00.0".to_string()], vec![]];
        assert_eq!(peer_matrix(&b, &switch), None);
        assert_eq!(peer_matrix(&b, &[vec![], vec![]]), None);
        // GPU 0 counts 2 links to GPU 1, GPU 1 counts 1.
        let uneven = vec![ends(&b, &[(1, 2)]), ends(&b, &[(0, 1)])];
        assert_eq!(peer_matrix(&b, &uneven), None);
        // One GPU NVML could not list.
        assert_eq!(peer_matrix(&b, &[ends(&b, &[(1, 1)])]), None);
    }
}
