// y = x·Wᵀ for a few rows of x (decode: m = 1) and a quantised W (n × k),
// dequantising each block in registers, with fused extras (see QFusion):
//   norm: x ← x·w/√(mean(x²) + eps)   glu: y ← silu(y[.., j])·y[.., j + n/2]
//   add:  y ← y + r
// The host prepends `const WORDS: u32` (u32 words per 32-weight block), `const
// QTYPE: u32` (2 Q4_0, 3 Q4_1, 8 Q8_0, ggml's type ids), `const LANES: u32` (the
// threads that share one output, a power of two ≤ 32) and `fn lane_sum(v: f32)
// -> f32`, which sums v over those LANES threads when the adapter has subgroup
// operations of at least LANES lanes (a shuffle butterfly, no shared memory);
// without them it returns v and the tree sum below runs instead (`SHUFFLE`).
// Blocks are repacked to whole words: Q4_0 [d as f32, 4 words of nibbles], Q4_1
// [d|m as two f16, 4 words] (ggml's own layout), Q8_0 [d as f32, 8 words of i8].
//
// A workgroup of 256 threads computes 256/LANES outputs of one x row; each thread
// takes half-blocks (16 weights) in turn. The row of x (normalised, when the norm
// is fused) is staged in shared memory once when it fits (k ≤ STAGE), so the
// dot products read it at shared-memory speed.
//
// p: [0] m, [1] n (rows of W), [2] k, [3] x offset, [4] x row stride, [5] flags
//    (1 norm, 2 glu, 4 add), [6] eps (f32 bits), [7] norm-scale offset,
//    [8] residual offset, [9] residual row stride.
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> nscale: array<f32>;
@group(0) @binding(4) var<storage, read> resid: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

const OUTS: u32 = 256u / LANES;
const STAGE: u32 = 2048u;

var<workgroup> red0: array<f32, 256>;
var<workgroup> red1: array<f32, 256>;
var<workgroup> xs: array<f32, STAGE>;
var<workgroup> inv_rms: f32;

var<private> xbase: u32;
var<private> nbase: u32;
var<private> xscale: f32;
var<private> normed: bool;
var<private> staged: bool;

fn xv(i: u32) -> f32 {
    if staged {
        return xs[i];
    }
    let v = x[xbase + i];
    if normed {
        return v * xscale * nscale[nbase + i];
    }
    return v;
}

// Σ over half-block h (0 or 1) of block `b` (a global block index) of w·x, where
// the block's weights meet x from index `xo`.
fn half_dot(b: u32, h: u32, xo: u32) -> f32 {
    let at = b * WORDS;
    if QTYPE == 8u {
        let d = bitcast<f32>(w[at]);
        var s = 0.0;
        for (var i = 0u; i < 4u; i++) {
            let q = bitcast<i32>(w[at + 1u + 4u * h + i]);
            let e = xo + 16u * h + 4u * i;
            s += f32(extractBits(q, 0u, 8u)) * xv(e) + f32(extractBits(q, 8u, 8u)) * xv(e + 1u)
               + f32(extractBits(q, 16u, 8u)) * xv(e + 2u) + f32(extractBits(q, 24u, 8u)) * xv(e + 3u);
        }
        return d * s;
    }
    // Nibbles: byte j of the 16 holds weight j (low) and weight j + 16 (high);
    // half h takes bytes 8h..8h+8, i.e. words 1 + 2h and 2 + 2h.
    var s = 0.0;
    var sx = 0.0;
    for (var i = 0u; i < 2u; i++) {
        let q = w[at + 1u + 2u * h + i];
        let lo = xo + 8u * h + 4u * i;
        let hi = lo + 16u;
        for (var j = 0u; j < 4u; j++) {
            let a = xv(lo + j);
            let c = xv(hi + j);
            s += f32(extractBits(q, 8u * j, 4u)) * a + f32(extractBits(q, 8u * j + 4u, 4u)) * c;
            sx += a + c;
        }
    }
    if QTYPE == 3u {
        let dm = unpack2x16float(w[at]);
        return dm.x * s + dm.y * sx;
    }
    let d = bitcast<f32>(w[at]);
    return d * (s - 8.0 * sx);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let n = p[1];
    let k = p[2];
    let flags = p[5];
    let glu = (flags & 2u) != 0u;
    let width = select(n, n / 2u, glu);
    let row = wid.y;
    xbase = p[3] + row * p[4];
    nbase = p[7];
    normed = false;
    staged = false;
    xscale = 1.0;
    if (flags & 1u) != 0u {
        var ss = 0.0;
        for (var i = li; i < k; i += 256u) {
            let v = x[xbase + i];
            ss += v * v;
        }
        red0[li] = ss;
        workgroupBarrier();
        for (var s = 128u; s > 0u; s >>= 1u) {
            if li < s {
                red0[li] += red0[li + s];
            }
            workgroupBarrier();
        }
        if li == 0u {
            inv_rms = inverseSqrt(red0[0] / f32(k) + bitcast<f32>(p[6]));
        }
        workgroupBarrier();
        xscale = inv_rms;
        normed = true;
    }
    if k <= STAGE {
        for (var i = li; i < k; i += 256u) {
            xs[i] = xv(i);
        }
        workgroupBarrier();
        staged = true;
    }
    let lane = li % LANES;
    let slot = li / LANES;
    let j = wid.x * OUTS + slot;
    let blocks = k / 32u;
    var a0 = 0.0;
    var a1 = 0.0;
    if j < width {
        for (var hb = lane; hb < 2u * blocks; hb += LANES) {
            let b = hb / 2u;
            let h = hb % 2u;
            a0 += half_dot(j * blocks + b, h, b * 32u);
            if glu {
                a1 += half_dot((j + width) * blocks + b, h, b * 32u);
            }
        }
    }
    a0 = lane_sum(a0);
    a1 = lane_sum(a1);
    if !SHUFFLE {
        red0[li] = a0;
        red1[li] = a1;
        workgroupBarrier();
        for (var s = LANES / 2u; s > 0u; s >>= 1u) {
            if lane < s {
                red0[li] += red0[li + s];
                red1[li] += red1[li + s];
            }
            workgroupBarrier();
        }
        a0 = red0[li];
        a1 = red1[li];
    }
    if lane == 0u && j < width {
        var y = a0;
        if glu {
            y = y / (1.0 + exp(-y)) * a1;
        }
        if (flags & 4u) != 0u {
            y += resid[p[8] + row * p[9] + j];
        }
        out[row * width + j] = y;
    }
}
