// out[.., i, ..] = x[.., idx[.., i, ..], ..] along one axis: one thread per output.
// An out-of-range index raises flag 0 (reported at the next sync) and writes 0.
//
// p: [0] outputs, [1] rank, [2] axis, [3] x's axis length, [4] x offset, [5] idx offset,
//    [6..12] output dims (= idx dims), [12..18] x strides, [18..24] idx strides,
//    [24] the index x starts at, [25] the axis length of the whole tensor. A table
//    too large for one binding is gathered a range of the axis at a time: x is that
//    range, and indices outside it (but within the whole) are another pass's.
// The element type: f32, or f16 in the variant the runtime derives (`with_elem`).
alias T = f32;

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read> idx: array<u32>;
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
    var xi = p[4];
    var ii = p[5];
    for (var a = i32(p[1]) - 1; a >= 0; a--) {
        let ua = u32(a);
        let d = p[6u + ua];
        let c = rem % d;
        rem /= d;
        ii += c * p[18u + ua];
        if (ua != axis) {
            xi += c * p[12u + ua];
        }
    }
    let k = idx[ii];
    if (k >= p[25]) {
        atomicOr(&flags[0], 1u);
        dst[o] = 0.0;
        return;
    }
    if (k < p[24] || k - p[24] >= p[3]) {
        return;
    }
    dst[o] = x[xi + (k - p[24]) * p[12u + axis]];
}
