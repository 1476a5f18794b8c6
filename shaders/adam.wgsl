// One Adam/AdamW step of one parameter, PyTorch's formulas, in one pass:
//   decoupled: p ← p·(1 − lr·λ)        L2: g ← g + λ·p
//   m ← β₁·m + (1 − β₁)·g               v ← β₂·v + (1 − β₂)·g²
//   p ← p − lr · (m·c₁) / (√(v·c₂) + ε)   with c₁ = 1/(1 − β₁ᵗ), c₂ = 1/(1 − β₂ᵗ)
// Reads p, g, m, v (contiguous, each from its offset) and writes p', m', v'. On the
// first step there are no moments: m and v are bound to g and read as 0. Every
// hyperparameter is a run-time parameter, so a new learning rate reuses the
// pipeline. One thread per element.
//
// p: [0] elements, [1] p offset, [2] g offset, [3] m offset, [4] v offset,
//    [5] 1 on the first step (m = v = 0), [6] 1 to apply L2 decay, [7] 1 to apply
//    decoupled decay; then f32 bits: [8] lr, [9] β₁, [10] 1 − β₁, [11] β₂,
//    [12] 1 − β₂, [13] ε, [14] λ, [15] 1 − lr·λ, [16] c₁, [17] c₂.
// The element type: f32, or f16 in the variant the runtime derives (`with_elem`).
alias T = f32;

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> param: array<T>;
@group(0) @binding(2) var<storage, read> grad: array<T>;
@group(0) @binding(3) var<storage, read> exp_avg: array<T>;
@group(0) @binding(4) var<storage, read> exp_avg_sq: array<T>;
@group(0) @binding(5) var<storage, read_write> param_out: array<T>;
@group(0) @binding(6) var<storage, read_write> exp_avg_out: array<T>;
@group(0) @binding(7) var<storage, read_write> exp_avg_sq_out: array<T>;

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
    let lr = f(8u);
    var x = f32(param[p[1] + o]);
    var g = f32(grad[p[2] + o]);
    if (p[6] != 0u) {
        g = g + x * f(14u);
    }
    if (p[7] != 0u) {
        x = x * f(15u);
    }
    var m = 0.0;
    var v = 0.0;
    if (p[5] == 0u) {
        m = f32(exp_avg[p[3] + o]);
        v = f32(exp_avg_sq[p[4] + o]);
    }
    m = m * f(9u) + g * f(10u);
    v = v * f(11u) + (g * g) * f(12u);
    let denom = sqrt(v * f(17u)) + f(13u);
    param_out[o] = T(x - ((m * f(16u)) / denom) * lr);
    exp_avg_out[o] = T(m);
    exp_avg_sq_out[o] = T(v);
}
