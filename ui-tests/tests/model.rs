//! `model!` blocks that do not fit are rejected by `cargo check` (no pass case in
//! this `TestCases`, so trybuild checks rather than builds), each error at the
//! offending layer and naming both shapes.

#[test]
fn model_errors_fail_cargo_check() {
    let t = trybuild::TestCases::new();
    t.compile_fail("cases/model/*.rs");
}
