// y = x·Wᵀ for a few rows of x (decode: m = 1) and a quantised W (n × k),
// dequantising each block in registers, with fused extras (see QFusion):
//   norm: x ← x·w/√(mean(x²) + eps)   glu: y ← silu(y[.., j])·y[.., j + n/2]
//   add:  y ← y + r
// The host prepends `const WORDS: u32` (u32 words per 32-weight block), `const
// QTYPE: u32` (2 Q4_0, 3 Q4_1, 8 Q8_0, ggml's type ids; 255 sub-blocks, the
// form every other block type and mix of types is held in), `const WG: u32` (threads
// per workgroup), `const LANES: u32` (the threads that share one output, a power
// of two ≤ 32) and `fn lane_sum(v: f32) -> f32`, which sums v over those LANES
// threads when the adapter has subgroup operations of at least LANES lanes (a
// shuffle butterfly, no shared memory); without them it returns v and tree sums
// in shared memory run instead (`SHUFFLE`).
// Blocks are repacked to whole words: Q4_0 [d as f32, 4 words of nibbles], Q4_1
// [d|m as two f16, 4 words] (ggml's own layout), Q8_0 [d as f32, 8 words of i8],
// sub-blocks [d0, d1, m as f32, 8 words of i8]: x = q·d0 + m (first 16 weights),
// q·d1 + m (last 16).
//
// Decode is latency-bound (a few µs per kernel), so the kernel is laid out to wait
// on memory as few times as it can: each thread loads its first two weight blocks
// before anything else, the row of x (times the norm's scale) is staged in shared
// memory while those loads are in flight, and the norm's 1/rms, a sum over the
// whole row, multiplies the finished dot products instead of x, so staging never
// waits for it. One barrier separates the loads from the arithmetic.
//
// A workgroup computes OUTS = WG / LANES outputs of one row of x, `reps` times
// (p[10]: consecutive groups of OUTS, so a very wide W runs in fewer workgroups,
// each staging x once). Lane l of an output takes blocks l, l + LANES, ...
//
// The host also prepends `const FLAGS: u32` (1 norm, 2 glu, 4 add), `const N: u32`
// and `const K: u32` (W's shape) and `const REPS: u32` (as p[10]), so the first
// weight loads need no parameter.
// A W larger than one binding runs in slices of its rows: each launch binds a
// window that starts at its first row, N is the slice's rows and `out` its own
// m × N columns (the host places them; glu then runs as a separate epilogue).
//
// p: [0] m, [1] n (rows of W), [2] k, [3] x offset, [4] x row stride, [5] flags
//    (as FLAGS), [6] eps (f32 bits), [7] norm-scale offset,
//    [8] residual offset, [9] residual row stride, [10] reps.
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> nscale: array<f32>;
@group(0) @binding(4) var<storage, read> resid: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

const OUTS: u32 = WG / LANES;
// Longest row of x staged in shared memory (as vec4s).
const STAGE: u32 = 2048u;

var<workgroup> red0: array<f32, WG>;
var<workgroup> red1: array<f32, WG>;
var<workgroup> xs: array<vec4<f32>, STAGE / 4u>;

var<private> xbase: u32;
var<private> nbase: u32;
var<private> normed: bool;
var<private> staged: bool;

// One block's words (sub-blocks, the widest, take 11).
alias Block = array<u32, 11>;

fn load_block(b: u32) -> Block {
    var q: Block;
    for (var i = 0u; i < WORDS; i++) {
        q[i] = w[b * WORDS + i];
    }
    return q;
}

// x[e..e + 4] times the norm's scale (not yet its 1/rms).
fn x_global(e: u32) -> vec4<f32> {
    let a = xbase + e;
    var v = vec4<f32>(x[a], x[a + 1u], x[a + 2u], x[a + 3u]);
    if normed {
        let s = nbase + e;
        v *= vec4<f32>(nscale[s], nscale[s + 1u], nscale[s + 2u], nscale[s + 3u]);
    }
    return v;
}

// Weights 4i..4i + 4 of block b's slice of x.
fn x4(b: u32, i: u32) -> vec4<f32> {
    if staged {
        return xs[b * 8u + i];
    }
    return x_global(b * 32u + 4u * i);
}

// Σ over block b (of this row) of w·x.
fn block_dot(q: Block, b: u32) -> f32 {
    if QTYPE == 255u {
        var s0 = 0.0;
        var s1 = 0.0;
        var sx = vec4<f32>(0.0);
        for (var i = 0u; i < 4u; i++) {
            let x0 = x4(b, i);
            let x1 = x4(b, 4u + i);
            s0 += dot(vec4<f32>(unpack4xI8(q[3u + i])), x0);
            s1 += dot(vec4<f32>(unpack4xI8(q[7u + i])), x1);
            sx += x0 + x1;
        }
        let m = bitcast<f32>(q[2]);
        return bitcast<f32>(q[0]) * s0 + bitcast<f32>(q[1]) * s1 + m * (sx.x + sx.y + sx.z + sx.w);
    }
    if QTYPE == 8u {
        var s = 0.0;
        for (var i = 0u; i < 8u; i++) {
            s += dot(vec4<f32>(unpack4xI8(q[1u + i])), x4(b, i));
        }
        return bitcast<f32>(q[0]) * s;
    }
    // Nibbles: byte j of the 16 holds weight j (low) and weight j + 16 (high).
    var s = 0.0;
    var sx = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        let lo = vec4<f32>(unpack4xU8(q[1u + i] & 0x0F0F0F0Fu));
        let hi = vec4<f32>(unpack4xU8((q[1u + i] >> 4u) & 0x0F0F0F0Fu));
        let xl = x4(b, i);
        let xh = x4(b, 4u + i);
        s += dot(lo, xl) + dot(hi, xh);
        sx += xl + xh;
    }
    let sum_x = sx.x + sx.y + sx.z + sx.w;
    if QTYPE == 3u {
        let dm = unpack2x16float(q[0]);
        return dm.x * s + dm.y * sum_x;
    }
    return bitcast<f32>(q[0]) * (s - 8.0 * sum_x);
}

// Σ of v over the workgroup (every thread gets it).
fn group_sum(li: u32, v: f32) -> f32 {
    if SHUFFLE {
        let s = lane_sum(v);
        if li % LANES == 0u {
            red1[li / LANES] = s;
        }
        workgroupBarrier();
        var t = 0.0;
        for (var i = 0u; i < OUTS; i++) {
            t += red1[i];
        }
        workgroupBarrier();
        return t;
    }
    red1[li] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if li < s {
            red1[li] += red1[li + s];
        }
        workgroupBarrier();
    }
    let t = red1[0];
    workgroupBarrier();
    return t;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let k = K;
    let flags = FLAGS;
    let glu = (flags & 2u) != 0u;
    let add = (flags & 4u) != 0u;
    let width = select(N, N / 2u, glu);
    let lane = li % LANES;
    let blocks = k / 32u;
    // This thread's first two blocks (and their gate partners), in flight
    // meanwhile. With one output group per workgroup (reps = 1, the rule) these
    // are the kernel's first loads.
    let reps = REPS;
    let j0 = wid.x * OUTS * reps + li / LANES;
    let early = j0 < width && lane < blocks;
    let early2 = j0 < width && lane + LANES < blocks;
    var first0: Block;
    var first1: Block;
    var second0: Block;
    var second1: Block;
    if early {
        first0 = load_block(j0 * blocks + lane);
        if glu {
            first1 = load_block((j0 + width) * blocks + lane);
        }
    }
    if early2 {
        second0 = load_block(j0 * blocks + lane + LANES);
        if glu {
            second1 = load_block((j0 + width) * blocks + lane + LANES);
        }
    }
    let row = wid.y;
    var r0 = 0.0;
    if add && lane == 0u && j0 < width {
        r0 = resid[p[8] + row * p[9] + j0];
    }
    xbase = p[3] + row * p[4];
    nbase = p[7];
    normed = (flags & 1u) != 0u;
    staged = k <= STAGE;
    var ss = 0.0;
    if staged {
        for (var i = li; i < k / 4u; i += WG) {
            let a = xbase + 4u * i;
            let v = vec4<f32>(x[a], x[a + 1u], x[a + 2u], x[a + 3u]);
            ss += dot(v, v);
            xs[i] = x_global(4u * i);
        }
    } else if normed {
        for (var i = li; i < k; i += WG) {
            let v = x[xbase + i];
            ss += v * v;
        }
    }
    // The barrier inside also publishes xs.
    let total = group_sum(li, ss);
    let scale = select(1.0, inverseSqrt(total / f32(k) + bitcast<f32>(p[6])), normed);

    for (var r = 0u; r < reps; r++) {
        let j = j0 + r * OUTS;
        var a0 = 0.0;
        var a1 = 0.0;
        if j < width {
            var b = lane;
            if r == 0u && early {
                a0 = block_dot(first0, b);
                if glu {
                    a1 = block_dot(first1, b);
                }
                b += LANES;
                if early2 {
                    a0 += block_dot(second0, b);
                    if glu {
                        a1 += block_dot(second1, b);
                    }
                    b += LANES;
                }
            }
            for (; b < blocks; b += LANES) {
                a0 += block_dot(load_block(j * blocks + b), b);
                if glu {
                    a1 += block_dot(load_block((j + width) * blocks + b), b);
                }
            }
        }
        a0 = lane_sum(a0);
        a1 = lane_sum(a1);
        if !SHUFFLE && LANES > 1u {
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
            workgroupBarrier();
        }
        if lane == 0u && j < width {
            var y = a0 * scale;
            if glu {
                y = y / (1.0 + exp(-y)) * (a1 * scale);
            }
            if add {
                if r == 0u {
                    y += r0;
                } else {
                    y += resid[p[8] + row * p[9] + j];
                }
            }
            out[row * width + j] = y;
        }
    }
}
