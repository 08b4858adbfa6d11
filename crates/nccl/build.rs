//! Compiles `profiler/collbench_profiler.c`, collbench's NCCL profiler
//! plugin, into a shared library in OUT_DIR. The crate embeds the library
//! (`include_bytes!`) and writes it to a private file at run time, so users
//! never build or install it.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "profiler/collbench_profiler.c";
    println!("cargo:rerun-if-changed={src}");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("libnccl-profiler-collbench.so");
    // The system C compiler as cc finds it (CC, or cc/gcc/clang), without
    // cc's static-archive step: NCCL needs a shared object.
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .opt_level(2)
        .get_compiler();
    let mut cmd: Command = compiler.to_command();
    cmd.args(["-shared", "-fPIC", "-O2", "-pthread", "-Wall", "-o"])
        .arg(&out)
        .arg(src);
    let status = cmd.status().unwrap_or_else(|e| {
        panic!(
            "cannot run the C compiler {:?} to build {src}: {e}; install gcc or clang, or set CC",
            compiler.path()
        )
    });
    assert!(
        status.success(),
        "building {src} with {:?} failed ({status})",
        compiler.path()
    );
}
