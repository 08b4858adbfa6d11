//! Golden snapshots of one launch file per target. A reviewer reads the
//! `.snap` files under `tests/snapshots/`; `cargo insta review` updates them.

mod gen_common;
use gen_common::{gen, gen_line};

#[test]
fn slurm_script() {
    let text = gen_line(
        "slurm --nodes 2 --gpus-per-node 8 --partition gpu --account research \
         --time 00:30:00 --container nvcr.io/nvidia/pytorch:25.01-py3 \
         --container-runtime pyxis --env NCCL_DEBUG=INFO \
         --env NCCL_IB_HCA=mlx5_1:1,mlx5_2:1 --env NCCL_SOCKET_IFNAME=eth0 \
         -- run all_reduce -b 8 -e 8G -f 2",
    )
    .unwrap();
    insta::assert_snapshot!(text);
}

#[test]
fn slurm_script_apptainer_defaults() {
    let text = gen_line(
        "slurm --nodes 4 --gpus-per-node 4 --container collbench.sif \
         --container-runtime apptainer",
    )
    .unwrap();
    insta::assert_snapshot!(text);
}

#[test]
fn slurm_script_podman_hpc() {
    let text = gen_line(
        "slurm --nodes 2 --gpus-per-node 4 \
         --container registry.example/collbench:1 \
         --container-runtime podman-hpc --env NCCL_DEBUG=WARN",
    )
    .unwrap();
    insta::assert_snapshot!(text);
}

/// `--container` alone: collbench's own image, in enroot's spelling.
#[test]
fn slurm_script_default_container() {
    let text = gen_line("slurm --nodes 2 --gpus-per-node 8 --container").unwrap();
    let image = collbench_gen::DEFAULT_IMAGE.replacen('/', "#", 1);
    assert!(
        text.contains(&format!("'--container-image={image}'")),
        "{text}"
    );
    let apptainer = gen_line("slurm --nodes 2 --gpus-per-node 8 --container-runtime apptainer");
    let want = format!(
        "apptainer exec --nv docker://{}",
        collbench_gen::DEFAULT_IMAGE
    );
    assert!(apptainer.unwrap().contains(&want));
}

const K8S_COMMON: &[&str] = &[
    "--nodes",
    "2",
    "--gpus-per-node",
    "8",
    "--image",
    "ghcr.io/example/collbench:0.1",
    "--name",
    "nccl-all",
    "--namespace",
    "bench",
    "--resource",
    "rdma/ib=1",
    "--queue",
    "a4",
    "--env",
    "NCCL_DEBUG=INFO",
    "--env",
    "NCCL_NVLS_ENABLE=0",
];

fn k8s(kind: &str) -> String {
    let mut argv = vec!["k8s", "--kind", kind];
    argv.extend_from_slice(K8S_COMMON);
    gen(&argv).unwrap()
}

#[test]
fn k8s_jobset() {
    insta::assert_snapshot!(k8s("jobset"));
}

#[test]
fn k8s_indexed_job() {
    insta::assert_snapshot!(k8s("indexed-job"));
}

/// The user's training image runs the pods; an init container copies
/// collbench from the default image; Kueue keeps the pods in one block.
#[test]
fn k8s_jobset_injected_with_topology() {
    let text = gen_line(
        "k8s --kind jobset --nodes 2 --gpus-per-node 8 --name nccl-all \
         --inject-into nvcr.io/nvidia/pytorch:25.01-py3 \
         --topology-required cloud.google.com/gce-topology-block --queue a4 \
         -- run all_gather -b 1K -e 8G",
    )
    .unwrap();
    // The default image's tag is the version: the snapshot names it VERSION.
    let text = text.replace(env!("CARGO_PKG_VERSION"), "VERSION");
    insta::assert_snapshot!(text);
}

#[test]
fn k8s_mpijob() {
    insta::assert_snapshot!(k8s("mpijob"));
}

#[test]
fn mpirun_line() {
    let text = gen_line(
        "mpirun --hosts 10.0.0.1:8,10.0.0.2:8 \
         --env NCCL_IB_HCA=mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1 \
         --env NCCL_IB_DISABLE=0 --env NCCL_SOCKET_IFNAME=eth0 \
         --env NCCL_IB_GID_INDEX=3 --env NCCL_DEBUG=INFO \
         --collbench /opt/collbench/bin/collbench \
         -- run all_reduce -b 256M -e 8G -f 2",
    )
    .unwrap();
    insta::assert_snapshot!(text);
}
