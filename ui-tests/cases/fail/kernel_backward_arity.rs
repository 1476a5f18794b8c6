// `backward = [..]` lists one partial per tensor argument.
use volta::kernel;

#[kernel]
fn d_any(a: f32, b: f32) -> f32 {
    a + b
}

#[kernel(backward = [d_any])]
fn pair(a: f32, b: f32) -> f32 {
    a * b
}

fn main() {}
