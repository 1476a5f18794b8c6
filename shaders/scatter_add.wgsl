// The adjoint of gather: out[.., t, ..] = Σ_j [idx[.., j, ..] == t] · src[.., j, ..].
// One thread per output element scans the index axis, so no two threads write the
// same element: race-free without float atomics. Out-of-range indices raise flag 0.
//
// p: [0] outputs, [1] rank, [2] axis, [3] output axis length, [4] idx axis length,
//    [5] idx offset, [6] src offset, [7..13] output dims, [13..19] idx strides,
//    [19..25] src strides, [25] the output axis position this launch starts at
//    (a slice of a result larger than one binding), [26] the axis length of the
//    whole result. Indices outside this launch's rows are another launch's.
// The element type: f32, or f16 in the variant the runtime derives (`with_elem`).
alias T = f32;

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> idx: array<u32>;
@group(0) @binding(2) var<storage, read> src: array<T>;
@group(0) @binding(3) var<storage, read_write> dst: array<T>;
@group(0) @binding(4) var<storage, read_write> flags: array<atomic<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let o = (wid.y * nwg.x + wid.x) * 256u + li;
    if (o >= p[0]) {
        return;
    }
    let axis = p[2];
    var rem = o;
    var ii = p[5];
    var si = p[6];
    var t = 0u;
    for (var a = i32(p[1]) - 1; a >= 0; a--) {
        let ua = u32(a);
        let d = p[7u + ua];
        let c = rem % d;
        rem /= d;
        if (ua == axis) {
            t = c + p[25];
        } else {
            ii += c * p[13u + ua];
            si += c * p[19u + ua];
        }
    }
    let istep = p[13u + axis];
    let sstep = p[19u + axis];
    var acc = 0.0;
    for (var j = 0u; j < p[4]; j++) {
        let k = idx[ii + j * istep];
        if (k == t) {
            acc += f32(src[si + j * sstep]);
        } else if (k >= p[26]) {
            atomicOr(&flags[0], 1u);
        }
    }
    dst[o] = T(acc);
}
