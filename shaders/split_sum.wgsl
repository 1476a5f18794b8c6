// A quantised product's split-K partial products, (S, m, n), summed in a fixed
// order (deterministic), then its epilogues (see QFusion):
//   norm: y ← y/√(mean(x²) + eps), x the product's input row (whose columns
//         the product's kernel has already multiplied by the norm's weights:
//         the 1/rms of the row is linear, so it waits for the sums)
//   glu:  y ← silu(y[.., j])·y[.., j + n/2]   add: y ← y + r
// so a batch of decoded tokens' product, norm and gate or residual end in one
// kernel. A workgroup per WG outputs of a row, a thread per output; with the
// norm, each workgroup sums its row's squares itself (the row is short and in
// L2; a kernel of its own would cost more).
//
// p: [0] S, [1] m, [2] n, [3] flags (1 norm, 2 glu, 4 add), [4] residual
//    offset, [5] residual row stride, [6] x offset, [7] x row stride, [8] k
//    (x's row length), [9] eps (f32 bits).
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> partials: array<f32>;
@group(0) @binding(2) var<storage, read> resid: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const WG: u32 = 256u;

var<workgroup> red: array<f32, WG>;

// Σ over the splits of column j of row r, four loads in flight at a time
// (the sum waits on memory; the order is fixed).
fn total(r: u32, j: u32) -> f32 {
    let plane = p[1] * p[2];
    let at = r * p[2] + j;
    var y = 0.0;
    var s = 0u;
    for (; s + 4u <= p[0]; s += 4u) {
        let a = partials[s * plane + at];
        let b = partials[(s + 1u) * plane + at];
        let c = partials[(s + 2u) * plane + at];
        let d = partials[(s + 3u) * plane + at];
        y += (a + b) + (c + d);
    }
    for (; s < p[0]; s++) {
        y += partials[s * plane + at];
    }
    return y;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let r = wid.y;
    let j = wid.x * WG + li;
    let flags = p[3];
    let glu = (flags & 2u) != 0u;
    let width = select(p[2], p[2] / 2u, glu);
    var scale = 1.0;
    if (flags & 1u) != 0u {
        let k = p[8];
        var ss = 0.0;
        for (var i = li; i < k; i += WG) {
            let v = x[p[6] + r * p[7] + i];
            ss += v * v;
        }
        red[li] = ss;
        workgroupBarrier();
        for (var o = WG / 2u; o > 0u; o >>= 1u) {
            if li < o {
                red[li] += red[li + o];
            }
            workgroupBarrier();
        }
        scale = inverseSqrt(red[0] / f32(k) + bitcast<f32>(p[9]));
    }
    if j >= width {
        return;
    }
    var y = total(r, j) * scale;
    if glu {
        y = y / (1.0 + exp(-y)) * (total(r, j + width) * scale);
    }
    if (flags & 4u) != 0u {
        y += resid[p[4] + r * p[5] + j];
    }
    out[r * width + j] = y;
}
