//! Compile-fail suite: every class of shape error must be rejected with a readable
//! message, and valid programs must build and run.
//!
//! The `pass` cases share the `TestCases` with the `compile_fail` ones on purpose:
//! with a pass case present trybuild runs `cargo build` instead of `cargo check`, which
//! is what evaluates the post-monomorphisation `const { assert!(..) }` size checks.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("cases/fail/*.rs");
    t.pass("cases/pass/*.rs");
}
