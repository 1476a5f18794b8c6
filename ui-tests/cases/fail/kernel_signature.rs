// A #[kernel] takes and returns `f32`, and needs at least one tensor argument.
use volta::kernel;

#[kernel]
fn wide(x: f64) -> f64 {
    x
}

#[kernel]
fn only_scalars(#[scalar] a: f32) -> f32 {
    a
}

fn main() {}
