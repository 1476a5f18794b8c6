// The WGSL generated for a kernel is validated with naga while compiling; an error
// points at the Rust token behind it (here `filter`, reserved in WGSL).
use volta::kernel;

#[kernel]
fn soften(filter: f32) -> f32 {
    filter * 0.5
}

fn main() {}
