// im2col: out[n, oh, ow, c, kh, kw] = x[n, c, oh·sh − ph + kh·dh, ow·sw − pw + kw·dw],
// or the pad value where that position falls in the padding. One thread per output
// element; x is read through its strides and offset.
//
// p: [0] outputs, [1] C, [2] H, [3] W, [4] OH, [5] OW, [6] KH, [7] KW, [8] sh, [9] sw,
//    [10] ph, [11] pw, [12] dh, [13] dw, [14] x offset, [15..19] x strides (n, c, h, w),
//    [19] the pad value's bits.
// The element type: f32, or f16 in the variant the runtime derives (`with_elem`).
alias T = f32;

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> dst: array<T>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let o = (wid.y * nwg.x + wid.x) * 256u + li;
    if (o >= p[0]) {
        return;
    }
    var rem = o;
    let kw = rem % p[7];
    rem /= p[7];
    let kh = rem % p[6];
    rem /= p[6];
    let c = rem % p[1];
    rem /= p[1];
    let ow = rem % p[5];
    rem /= p[5];
    let oh = rem % p[4];
    let n = rem / p[4];
    // Positions in the padded input; the real input starts at the padding.
    let ih = oh * p[8] + kh * p[12];
    let iw = ow * p[9] + kw * p[13];
    if (ih < p[10] || ih >= p[10] + p[2] || iw < p[11] || iw >= p[11] + p[3]) {
        dst[o] = T(bitcast<f32>(p[19]));
        return;
    }
    dst[o] = x[p[14] + n * p[15] + c * p[16] + (ih - p[10]) * p[17] + (iw - p[11]) * p[18]];
}
