// #[kernel] rejects Rust outside its subset, at the offending token.
use volta::kernel;

#[kernel]
fn accumulate(x: f32) -> f32 {
    let mut y = x;
    y += 1.0;
    y
}

#[kernel]
fn looping(x: f32) -> f32 {
    for _ in 0..3 {}
    x
}

fn main() {}
