//! A user's own NCCL_PROFILER_PLUGIN is left alone: collbench does not
//! override it, and explanations say why (own process: the variable and
//! the installed plugin are process-wide).

use collbench_nccl::explain::backend_hook::{expected_ranks, explain_case};
use collbench_nccl::explain::Explainer;

#[test]
fn a_user_plugin_is_respected_and_the_columns_say_why() {
    std::env::set_var("NCCL_PROFILER_PLUGIN", "/nonexistent/libmine.so");
    let ex = Explainer::install();
    assert_eq!(
        std::env::var("NCCL_PROFILER_PLUGIN").unwrap(),
        "/nonexistent/libmine.so"
    );
    assert_eq!(ex.plugin_path(), None);
    let mut ran = false;
    let e = explain_case(&ex, &expected_ranks([(0, 0)]), || {
        ran = true;
        Ok(())
    })
    .unwrap()
    .unwrap();
    assert!(!ran, "nothing to record, so the case is not run");
    let why = e.unavailable.unwrap();
    assert!(why.contains("NCCL_PROFILER_PLUGIN is set"), "{why}");
    assert!(e.kernels.is_empty());
}
