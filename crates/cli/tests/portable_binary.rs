//! The portable binaries that `bash dist/build.sh` leaves in
//! `target/dist/` start on old Linux hosts: no glibc symbol version newer
//! than 2.17 (RHEL/CentOS 7, the manylinux2014 tag of the wheel), and only
//! the C library's own shared objects (NCCL, CUDA and NVML are opened at
//! run time with dlopen, hence libdl).
//!
//! Gated on COLLBENCH_DIST_TESTS=1 (`.ci/run` sets it after building);
//! without it the test says it skipped, and nextest's default profile
//! leaves it out.

use goblin::elf::Elf;
use std::path::{Path, PathBuf};

/// The newest glibc a portable binary may need.
const NEWEST_GLIBC: (u32, u32) = (2, 17);

/// Shared objects a portable binary may link: glibc's.
const ALLOWED_NEEDED: [&str; 6] = [
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
];

fn dist() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dist")
}

/// The `GLIBC_x.y[.z]` versions `elf` needs, as (major, minor).
fn glibc_needs(elf: &Elf) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let Some(verneed) = &elf.verneed else {
        return out;
    };
    for need in verneed.iter() {
        for aux in need.iter() {
            let name = elf.dynstrtab.get_at(aux.vna_name).unwrap_or("");
            if let Some(v) = name.strip_prefix("GLIBC_") {
                let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
                out.push((parts.next().unwrap_or(0), parts.next().unwrap_or(0)));
            }
        }
    }
    out
}

#[test]
fn dist_binaries_need_glibc_2_17_at_most() {
    if std::env::var("COLLBENCH_DIST_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: set COLLBENCH_DIST_TESTS=1 after `bash dist/build.sh`");
        return;
    }
    let x86 = dist().join("collbench");
    assert!(
        x86.exists(),
        "{} missing: run `bash dist/build.sh`",
        x86.display()
    );
    let arm = dist().join("collbench-aarch64");
    for bin in std::iter::once(x86).chain(arm.exists().then_some(arm)) {
        let bytes = std::fs::read(&bin).unwrap();
        let elf = Elf::parse(&bytes).unwrap();
        let needs = glibc_needs(&elf);
        let newest = needs.iter().max().copied().unwrap();
        eprintln!("{}: newest GLIBC_{}.{}", bin.display(), newest.0, newest.1);
        assert!(
            newest <= NEWEST_GLIBC,
            "{}: needs GLIBC_{}.{}",
            bin.display(),
            newest.0,
            newest.1
        );
        for lib in &elf.libraries {
            assert!(
                ALLOWED_NEEDED.contains(lib),
                "{}: links {lib}",
                bin.display()
            );
        }
        // dlopen of NCCL/CUDA/NVML on glibc < 2.34 lives in libdl.
        assert!(elf.libraries.contains(&"libdl.so.2"), "{}", bin.display());
    }
}
