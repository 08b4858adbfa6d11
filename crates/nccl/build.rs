//! Compiles collbench's NCCL plugins, `profiler/collbench_profiler.c` and
//! `tuner/collbench_tuner.c`, into shared libraries in OUT_DIR. The crate
//! embeds them (`include_bytes!`) and writes each to a private file at run
//! time, so users never build or install them.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    build_plugin(
        "profiler/collbench_profiler.c",
        "libnccl-profiler-collbench.so",
    );
    build_plugin("tuner/collbench_tuner.c", "libnccl-tuner-collbench.so");
}

/// Compiles one plugin source into OUT_DIR/`lib`.
fn build_plugin(src: &str, lib: &str) {
    println!("cargo:rerun-if-changed={src}");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join(lib);
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
