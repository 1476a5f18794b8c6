// Reduction of one contiguous axis (keep-dim) with vec4 loads: one workgroup per
// output, threads stride over the axis four elements at a time, then a
// shared-memory tree. The host substitutes IDENTITY and COMBINE(a, b) for the op
// and uses it only when the axis length, the offset and the other strides are
// multiples of 4 (so every row starts on a vec4).
//
// p: [0] outputs, [1] rank, [2] n = axis length, [3] axis stride (1), [4] input offset,
//    [5..11] input dims with the axis set to 1, [11..17] input strides.
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

const WG: u32 = 256u;
var<workgroup> partial: array<f32, WG>;

fn combine(a: f32, b: f32) -> f32 {
    return COMBINE;
}

// Element offset of the first element that output `o` reduces.
fn base(o: u32) -> u32 {
    var rem = o;
    var at = p[4];
    for (var a = i32(p[1]) - 1; a >= 0; a--) {
        let d = p[5u + u32(a)];
        at += (rem % d) * p[11u + u32(a)];
        rem /= d;
    }
    return at;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let o = wid.y * nwg.x + wid.x;
    if (o >= p[0]) {
        return;
    }
    let b = base(o) / 4u;
    let n4 = p[2] / 4u;
    var acc = IDENTITY;
    for (var k = li; k < n4; k += WG) {
        let v = src[b + k];
        acc = combine(acc, combine(combine(v.x, v.y), combine(v.z, v.w)));
    }
    partial[li] = acc;
    workgroupBarrier();
    for (var w = WG / 2u; w > 0u; w >>= 1u) {
        if (li < w) {
            partial[li] = combine(partial[li], partial[li + w]);
        }
        workgroupBarrier();
    }
    if (li == 0u) {
        dst[o] = partial[0];
    }
}
