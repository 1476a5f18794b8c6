//! Compile-fail suite: every class of shape error must be rejected with a readable
//! message, `model!` blocks that do not fit must be rejected at the offending layer
//! naming both shapes, and valid programs must build and run.
//!
//! One `TestCases` for all three directories on purpose:
//!
//! - trybuild builds Volta's dependencies once per `TestCases` project (and again
//!   for `cargo check` if another harness checks rather than builds): one harness
//!   builds them once.
//! - The `pass` cases make trybuild run `cargo build` instead of `cargo check`,
//!   which is what evaluates the post-monomorphisation `const { assert!(..) }` size
//!   checks of `cases/fail/`. The `cases/model/` errors are type and macro errors,
//!   reported the same by `cargo check` and `cargo build`.

#[test]
fn ui() {
    // trybuild's generated project does not inherit the workspace's `[profile.dev]`,
    // so cargo's defaults would compile every dependency (tokenizers, gemm, naga, ...)
    // with full debug info that nothing here reads. Leave it out, unless the caller
    // chose otherwise; diagnostics do not depend on it.
    if std::env::var_os("CARGO_PROFILE_DEV_DEBUG").is_none() {
        // SAFETY: the only test of this binary sets it before trybuild starts cargo,
        // and no other thread of this process reads the environment.
        unsafe { std::env::set_var("CARGO_PROFILE_DEV_DEBUG", "false") };
    }
    let t = trybuild::TestCases::new();
    t.compile_fail("cases/fail/*.rs");
    t.compile_fail("cases/model/*.rs");
    t.pass("cases/pass/*.rs");
}
