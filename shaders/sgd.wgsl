// One SGD-with-momentum step of one parameter, PyTorch's formulas, in one pass:
//   g ← g + λ·p;  b ← μ·b + g (b ← g on the first step);
//   Nesterov: g ← g + μ·b, else g ← b;  p ← p − lr·g
// Reads p, g, b (contiguous, each from its offset) and writes p', b'. On the first
// step there is no buffer: b is bound to g and not read. Hyperparameters are
// run-time parameters (a new learning rate reuses the pipeline). One thread per
// element.
//
// p: [0] elements, [1] p offset, [2] g offset, [3] b offset, [4] 1 on the first
//    step, [5] 1 to apply weight decay, [6] 1 for Nesterov; then f32 bits: [7] lr,
//    [8] μ, [9] λ.
// The element type: f32, or f16 in the variant the runtime derives (`with_elem`).
alias T = f32;

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> param: array<T>;
@group(0) @binding(2) var<storage, read> grad: array<T>;
@group(0) @binding(3) var<storage, read> buf: array<T>;
@group(0) @binding(4) var<storage, read_write> param_out: array<T>;
@group(0) @binding(5) var<storage, read_write> buf_out: array<T>;

fn f(i: u32) -> f32 {
    return bitcast<f32>(p[i]);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let o = (wid.y * nwg.x + wid.x) * 256u + li;
    if (o >= p[0]) {
        return;
    }
    let x = f32(param[p[1] + o]);
    var g = f32(grad[p[2] + o]);
    if (p[5] != 0u) {
        g = g + x * f(9u);
    }
    var b = g;
    if (p[4] == 0u) {
        b = f32(buf[p[3] + o]) * f(8u) + g;
    }
    if (p[6] != 0u) {
        g = g + b * f(8u);
    } else {
        g = b;
    }
    param_out[o] = T(x - g * f(7u));
    buf_out[o] = T(b);
}
