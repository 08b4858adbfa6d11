//! `gen k8s --inject-into IMAGE`: the pods run the user's own image (their
//! training image, with the NCCL training uses), and an init container from
//! the collbench image copies the binary into a volume the pods share. The
//! portable binary needs only glibc 2.17, so it runs in any Linux image.

use super::objects::{Container, EmptyDir, PodSpec, Volume, VolumeMount};

/// Where the copied binary lives in every container of the pod.
pub const DIR: &str = "/collbench-bin";

/// The injected collbench, as the pod's containers run it.
pub const PROGRAM: &str = "/collbench-bin/collbench";

const VOLUME: &str = "collbench-bin";

fn mount() -> VolumeMount {
    VolumeMount {
        name: VOLUME,
        mount_path: DIR,
    }
}

/// Adds the shared volume, mounts it in every container, and puts first
/// the init container that copies collbench from image `from` (any image
/// with a shell and collbench on its PATH, such as dist/Containerfile's
/// runtime stage) into it.
pub fn add(spec: &mut PodSpec, from: &str) {
    spec.volumes.push(Volume {
        name: VOLUME,
        empty_dir: EmptyDir { medium: None },
    });
    for c in &mut spec.containers {
        c.volume_mounts.push(mount());
    }
    spec.init_containers.insert(
        0,
        Container {
            name: "collbench-inject",
            image: from.to_string(),
            command: vec![
                "/bin/sh".into(),
                "-c".into(),
                format!("cp \"$(command -v collbench)\" {PROGRAM}"),
            ],
            args: Vec::new(),
            env: Vec::new(),
            ports: Vec::new(),
            resources: None,
            volume_mounts: vec![mount()],
        },
    );
}
