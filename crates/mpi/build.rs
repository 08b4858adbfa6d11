//! Compiles `src/in_place.c`, which exports MPI_IN_PLACE: a C macro with a
//! different value in each MPI implementation, and not bound by mpi-sys.

fn main() {
    println!("cargo:rerun-if-changed=src/in_place.c");
    let lib = build_probe_mpi::probe().unwrap_or_else(|errs| {
        let why: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        panic!(
            "collbench-mpi needs an MPI library (e.g. apt-get install libopenmpi-dev openmpi-bin): {}",
            why.join("; ")
        )
    });
    let mut build = cc::Build::new();
    build.file("src/in_place.c");
    match lib.mpicc {
        Some(mpicc) => {
            build.compiler(mpicc);
        }
        None => {
            build.includes(&lib.include_paths);
        }
    }
    build.compile("collbench_mpi_shim");
}
