//! The two plugins built into the library (the profiler behind
//! `--explain`, the tuner behind `tune`) are shared objects NCCL can
//! load. Read from outside the crate: `embedded` installs the bytes
//! and the two plugin modules own them, so neither imports the other.

#[test]
fn both_embedded_plugins_are_shared_objects() {
    let plugins = [
        ("profiler", collbench_nccl::explain::plugin::PLUGIN_SO),
        ("tuner", collbench_nccl::tuner::PLUGIN_SO),
    ];
    for (name, so) in plugins {
        assert_eq!(&so[..4], b"\x7fELF", "{name}: not an ELF file");
        // e_type ET_DYN: a shared object NCCL can dlopen.
        assert_eq!(so[16], 3, "{name}: not a shared object");
    }
}
