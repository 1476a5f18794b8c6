// col2im, the adjoint of unfold2d: img[n, c, h, w] = Σ cols[n, oh, ow, c, kh, kw] over
// the taps (kh, kw) and window positions (oh, ow) with oh·sh − ph + kh·dh = h and
// ow·sw − pw + kw·dw = w. One thread per image element gathers the taps that reach
// it, so no two threads write the same element: race-free without float atomics.
// cols is read through its strides and offset.
//
// p: [0] outputs, [1] C, [2] H, [3] W, [4] OH, [5] OW, [6] KH, [7] KW, [8] sh, [9] sw,
//    [10] ph, [11] pw, [12] dh, [13] dw, [14] cols offset,
//    [15..21] cols strides (n, oh, ow, c, kh, kw).
// The element type: f32, or f16 in the variant the runtime derives (`with_elem`).
alias T = f32;

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> cols: array<T>;
@group(0) @binding(2) var<storage, read_write> dst: array<T>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let o = (wid.y * nwg.x + wid.x) * 256u + li;
    if (o >= p[0]) {
        return;
    }
    var rem = o;
    let w = rem % p[3];
    rem /= p[3];
    let h = rem % p[2];
    rem /= p[2];
    let c = rem % p[1];
    let n = rem / p[1];
    // Positions in the padded input.
    let y = h + p[10];
    let x = w + p[11];
    let base = p[14] + n * p[15] + c * p[18];
    var acc = 0.0;
    for (var kh = 0u; kh < p[6] && kh * p[12] <= y; kh++) {
        let ty = y - kh * p[12];
        let oh = ty / p[8];
        if (ty % p[8] != 0u || oh >= p[4]) {
            continue;
        }
        for (var kw = 0u; kw < p[7] && kw * p[13] <= x; kw++) {
            let tx = x - kw * p[13];
            let ow = tx / p[9];
            if (tx % p[9] != 0u || ow >= p[5]) {
                continue;
            }
            acc += f32(cols[base + oh * p[16] + ow * p[17] + kh * p[19] + kw * p[20]]);
        }
    }
    dst[o] = T(acc);
}
