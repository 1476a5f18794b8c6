// A quantised product's split-K partial products, (S, m, n), summed in a fixed
// order (deterministic), then its epilogues (see QFusion):
//   glu: y ← silu(y[.., j])·y[.., j + n/2]   add: y ← y + r
// so a batch of decoded tokens' product ends in one kernel, not a sum followed
// by the gate's or the residual's own. One thread per output, (m, width).
//
// p: [0] S, [1] m, [2] n, [3] flags (2 glu, 4 add), [4] residual offset,
//    [5] residual row stride.
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> partials: array<f32>;
@group(0) @binding(2) var<storage, read> resid: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

// Σ over the splits of column j of row r.
fn total(r: u32, j: u32) -> f32 {
    var y = 0.0;
    for (var s = 0u; s < p[0]; s++) {
        y += partials[(s * p[1] + r) * p[2] + j];
    }
    return y;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let i = (wid.y * nwg.x + wid.x) * 256u + li;
    let glu = (p[3] & 2u) != 0u;
    let width = select(p[2], p[2] / 2u, glu);
    if i >= p[1] * width {
        return;
    }
    let r = i / width;
    let j = i % width;
    var y = total(r, j);
    if glu {
        y = y / (1.0 + exp(-y)) * total(r, j + width);
    }
    if (p[3] & 4u) != 0u {
        y += resid[p[4] + r * p[5] + j];
    }
    out[i] = y;
}
