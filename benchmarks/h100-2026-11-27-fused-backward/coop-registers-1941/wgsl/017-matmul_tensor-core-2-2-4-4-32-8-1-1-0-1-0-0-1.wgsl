enable f16;
enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
var<workgroup> As: array<vec4<f16>, 1280>;
var<workgroup> Bs: array<vec4<f16>, 1280>;
var<workgroup> Cs: array<f32, 1024>;

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32,
        @builtin(subgroup_size) lanes: u32) {
    let M = p[0]; let N = p[1]; let K = p[2];
    let z = wid.z;
    let m0 = wid.y * 128u; let n0 = wid.x * 128u;
    let a_base = p[3] + z * p[4]; let a_sm = p[5]; let a_sk = p[6];
    let b_base = p[7] + z * p[8]; let b_sk = p[9]; let b_sn = p[10];
    let sm = (sg / 2u) * 64u; let sn = (sg % 2u) * 64u;
    // Tiles wholly inside A, B and C load without bounds tests.
    let inside = m0 + 128u <= M && n0 + 128u <= N && K % 32u == 0u;
    var acc0_0 = coop_mat16x16<f32, C>();
    var acc0_1 = coop_mat16x16<f32, C>();
    var acc0_2 = coop_mat16x16<f32, C>();
    var acc0_3 = coop_mat16x16<f32, C>();
    var acc1_0 = coop_mat16x16<f32, C>();
    var acc1_1 = coop_mat16x16<f32, C>();
    var acc1_2 = coop_mat16x16<f32, C>();
    var acc1_3 = coop_mat16x16<f32, C>();
    var acc2_0 = coop_mat16x16<f32, C>();
    var acc2_1 = coop_mat16x16<f32, C>();
    var acc2_2 = coop_mat16x16<f32, C>();
    var acc2_3 = coop_mat16x16<f32, C>();
    var acc3_0 = coop_mat16x16<f32, C>();
    var acc3_1 = coop_mat16x16<f32, C>();
    var acc3_2 = coop_mat16x16<f32, C>();
    var acc3_3 = coop_mat16x16<f32, C>();
    var ra0: vec4<f32>;
    var ra1: vec4<f32>;
    var ra2: vec4<f32>;
    var ra3: vec4<f32>;
    var ra4: vec4<f32>;
    var ra5: vec4<f32>;
    var ra6: vec4<f32>;
    var ra7: vec4<f32>;
    var rb0: vec4<f32>;
    var rb1: vec4<f32>;
    var rb2: vec4<f32>;
    var rb3: vec4<f32>;
    var rb4: vec4<f32>;
    var rb5: vec4<f32>;
    var rb6: vec4<f32>;
    var rb7: vec4<f32>;
    let As_r = 0u; let Bs_r = 0u; let As_w = 0u; let Bs_w = 0u;
    { let kt = 0u;
        if (inside) {
        { let e = li + 0u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra0 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 128u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra1 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 256u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra2 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 384u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra3 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 512u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra4 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 640u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra5 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 768u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra6 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 896u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra7 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 0u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb0 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        { let e = li + 128u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb1 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        { let e = li + 256u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb2 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        { let e = li + 384u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb3 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        { let e = li + 512u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb4 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        { let e = li + 640u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb5 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        { let e = li + 768u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb6 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        { let e = li + 896u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb7 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        } else {
        { let e = li + 0u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra0 = vec4<f32>();
        if (gr < M && gc < K) { ra0 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 128u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra1 = vec4<f32>();
        if (gr < M && gc < K) { ra1 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 256u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra2 = vec4<f32>();
        if (gr < M && gc < K) { ra2 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 384u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra3 = vec4<f32>();
        if (gr < M && gc < K) { ra3 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 512u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra4 = vec4<f32>();
        if (gr < M && gc < K) { ra4 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 640u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra5 = vec4<f32>();
        if (gr < M && gc < K) { ra5 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 768u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra6 = vec4<f32>();
        if (gr < M && gc < K) { ra6 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 896u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra7 = vec4<f32>();
        if (gr < M && gc < K) { ra7 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 0u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb0 = vec4<f32>();
        if (gr < N && gc < K) { rb0 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        { let e = li + 128u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb1 = vec4<f32>();
        if (gr < N && gc < K) { rb1 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        { let e = li + 256u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb2 = vec4<f32>();
        if (gr < N && gc < K) { rb2 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        { let e = li + 384u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb3 = vec4<f32>();
        if (gr < N && gc < K) { rb3 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        { let e = li + 512u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb4 = vec4<f32>();
        if (gr < N && gc < K) { rb4 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        { let e = li + 640u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb5 = vec4<f32>();
        if (gr < N && gc < K) { rb5 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        { let e = li + 768u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb6 = vec4<f32>();
        if (gr < N && gc < K) { rb6 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        { let e = li + 896u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb7 = vec4<f32>();
        if (gr < N && gc < K) { rb7 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        }
    }
    for (var k0 = 0u; k0 < K; k0 += 32u) {
        { let e = li + 0u;
        As[As_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(ra0);
        }
        { let e = li + 128u;
        As[As_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(ra1);
        }
        { let e = li + 256u;
        As[As_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(ra2);
        }
        { let e = li + 384u;
        As[As_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(ra3);
        }
        { let e = li + 512u;
        As[As_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(ra4);
        }
        { let e = li + 640u;
        As[As_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(ra5);
        }
        { let e = li + 768u;
        As[As_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(ra6);
        }
        { let e = li + 896u;
        As[As_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(ra7);
        }
        { let e = li + 0u;
        Bs[Bs_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(rb0);
        }
        { let e = li + 128u;
        Bs[Bs_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(rb1);
        }
        { let e = li + 256u;
        Bs[Bs_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(rb2);
        }
        { let e = li + 384u;
        Bs[Bs_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(rb3);
        }
        { let e = li + 512u;
        Bs[Bs_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(rb4);
        }
        { let e = li + 640u;
        Bs[Bs_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(rb5);
        }
        { let e = li + 768u;
        Bs[Bs_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(rb6);
        }
        { let e = li + 896u;
        Bs[Bs_w + (e / 8u) * 10u + e % 8u] = vec4<f16>(rb7);
        }
        workgroupBarrier();
        let kt = k0 + 32u;
        if (kt < K) {
        if (inside) {
        { let e = li + 0u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra0 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 128u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra1 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 256u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra2 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 384u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra3 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 512u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra4 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 640u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra5 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 768u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra6 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 896u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra7 = a[(a_base + gr * a_sm + gc) / 4u];
        }
        { let e = li + 0u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb0 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        { let e = li + 128u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb1 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        { let e = li + 256u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb2 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        { let e = li + 384u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb3 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        { let e = li + 512u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb4 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        { let e = li + 640u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb5 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        { let e = li + 768u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb6 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        { let e = li + 896u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb7 = b[(b_base + gr * b_sn + gc) / 4u];
        }
        } else {
        { let e = li + 0u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra0 = vec4<f32>();
        if (gr < M && gc < K) { ra0 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 128u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra1 = vec4<f32>();
        if (gr < M && gc < K) { ra1 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 256u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra2 = vec4<f32>();
        if (gr < M && gc < K) { ra2 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 384u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra3 = vec4<f32>();
        if (gr < M && gc < K) { ra3 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 512u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra4 = vec4<f32>();
        if (gr < M && gc < K) { ra4 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 640u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra5 = vec4<f32>();
        if (gr < M && gc < K) { ra5 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 768u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra6 = vec4<f32>();
        if (gr < M && gc < K) { ra6 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 896u;
        let gr = m0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        ra7 = vec4<f32>();
        if (gr < M && gc < K) { ra7 = a[(a_base + gr * a_sm + gc) / 4u]; }
        }
        { let e = li + 0u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb0 = vec4<f32>();
        if (gr < N && gc < K) { rb0 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        { let e = li + 128u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb1 = vec4<f32>();
        if (gr < N && gc < K) { rb1 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        { let e = li + 256u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb2 = vec4<f32>();
        if (gr < N && gc < K) { rb2 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        { let e = li + 384u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb3 = vec4<f32>();
        if (gr < N && gc < K) { rb3 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        { let e = li + 512u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb4 = vec4<f32>();
        if (gr < N && gc < K) { rb4 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        { let e = li + 640u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb5 = vec4<f32>();
        if (gr < N && gc < K) { rb5 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        { let e = li + 768u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb6 = vec4<f32>();
        if (gr < N && gc < K) { rb6 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        { let e = li + 896u;
        let gr = n0 + e / 8u; let gc = kt + (e % 8u) * 4u;
        rb7 = vec4<f32>();
        if (gr < N && gc < K) { rb7 = b[(b_base + gr * b_sn + gc) / 4u]; }
        }
        }
        }
        {
        let ia0 = As_r + (sm + 0u) * 10u + 0u; let fa0 = coopLoadT<coop_mat16x16<f16, A>>(&As[ia0], 10u);
        let ia1 = As_r + (sm + 16u) * 10u + 0u; let fa1 = coopLoadT<coop_mat16x16<f16, A>>(&As[ia1], 10u);
        let ia2 = As_r + (sm + 32u) * 10u + 0u; let fa2 = coopLoadT<coop_mat16x16<f16, A>>(&As[ia2], 10u);
        let ia3 = As_r + (sm + 48u) * 10u + 0u; let fa3 = coopLoadT<coop_mat16x16<f16, A>>(&As[ia3], 10u);
        let ib0 = Bs_r + (sn + 0u) * 10u + 0u; let fb0 = coopLoad<coop_mat16x16<f16, B>>(&Bs[ib0], 10u);
        let ib1 = Bs_r + (sn + 16u) * 10u + 0u; let fb1 = coopLoad<coop_mat16x16<f16, B>>(&Bs[ib1], 10u);
        let ib2 = Bs_r + (sn + 32u) * 10u + 0u; let fb2 = coopLoad<coop_mat16x16<f16, B>>(&Bs[ib2], 10u);
        let ib3 = Bs_r + (sn + 48u) * 10u + 0u; let fb3 = coopLoad<coop_mat16x16<f16, B>>(&Bs[ib3], 10u);
        acc0_0 = coopMultiplyAdd(fa0, fb0, acc0_0);
        acc0_1 = coopMultiplyAdd(fa0, fb1, acc0_1);
        acc0_2 = coopMultiplyAdd(fa0, fb2, acc0_2);
        acc0_3 = coopMultiplyAdd(fa0, fb3, acc0_3);
        acc1_0 = coopMultiplyAdd(fa1, fb0, acc1_0);
        acc1_1 = coopMultiplyAdd(fa1, fb1, acc1_1);
        acc1_2 = coopMultiplyAdd(fa1, fb2, acc1_2);
        acc1_3 = coopMultiplyAdd(fa1, fb3, acc1_3);
        acc2_0 = coopMultiplyAdd(fa2, fb0, acc2_0);
        acc2_1 = coopMultiplyAdd(fa2, fb1, acc2_1);
        acc2_2 = coopMultiplyAdd(fa2, fb2, acc2_2);
        acc2_3 = coopMultiplyAdd(fa2, fb3, acc2_3);
        acc3_0 = coopMultiplyAdd(fa3, fb0, acc3_0);
        acc3_1 = coopMultiplyAdd(fa3, fb1, acc3_1);
        acc3_2 = coopMultiplyAdd(fa3, fb2, acc3_2);
        acc3_3 = coopMultiplyAdd(fa3, fb3, acc3_3);
        }
        {
        let ia0 = As_r + (sm + 0u) * 10u + 4u; let fa0 = coopLoadT<coop_mat16x16<f16, A>>(&As[ia0], 10u);
        let ia1 = As_r + (sm + 16u) * 10u + 4u; let fa1 = coopLoadT<coop_mat16x16<f16, A>>(&As[ia1], 10u);
        let ia2 = As_r + (sm + 32u) * 10u + 4u; let fa2 = coopLoadT<coop_mat16x16<f16, A>>(&As[ia2], 10u);
        let ia3 = As_r + (sm + 48u) * 10u + 4u; let fa3 = coopLoadT<coop_mat16x16<f16, A>>(&As[ia3], 10u);
        let ib0 = Bs_r + (sn + 0u) * 10u + 4u; let fb0 = coopLoad<coop_mat16x16<f16, B>>(&Bs[ib0], 10u);
        let ib1 = Bs_r + (sn + 16u) * 10u + 4u; let fb1 = coopLoad<coop_mat16x16<f16, B>>(&Bs[ib1], 10u);
        let ib2 = Bs_r + (sn + 32u) * 10u + 4u; let fb2 = coopLoad<coop_mat16x16<f16, B>>(&Bs[ib2], 10u);
        let ib3 = Bs_r + (sn + 48u) * 10u + 4u; let fb3 = coopLoad<coop_mat16x16<f16, B>>(&Bs[ib3], 10u);
        acc0_0 = coopMultiplyAdd(fa0, fb0, acc0_0);
        acc0_1 = coopMultiplyAdd(fa0, fb1, acc0_1);
        acc0_2 = coopMultiplyAdd(fa0, fb2, acc0_2);
        acc0_3 = coopMultiplyAdd(fa0, fb3, acc0_3);
        acc1_0 = coopMultiplyAdd(fa1, fb0, acc1_0);
        acc1_1 = coopMultiplyAdd(fa1, fb1, acc1_1);
        acc1_2 = coopMultiplyAdd(fa1, fb2, acc1_2);
        acc1_3 = coopMultiplyAdd(fa1, fb3, acc1_3);
        acc2_0 = coopMultiplyAdd(fa2, fb0, acc2_0);
        acc2_1 = coopMultiplyAdd(fa2, fb1, acc2_1);
        acc2_2 = coopMultiplyAdd(fa2, fb2, acc2_2);
        acc2_3 = coopMultiplyAdd(fa2, fb3, acc2_3);
        acc3_0 = coopMultiplyAdd(fa3, fb0, acc3_0);
        acc3_1 = coopMultiplyAdd(fa3, fb1, acc3_1);
        acc3_2 = coopMultiplyAdd(fa3, fb2, acc3_2);
        acc3_3 = coopMultiplyAdd(fa3, fb3, acc3_3);
        }
        workgroupBarrier();
    }
    if (m0 + 128u <= M && n0 + 128u <= N && N % 4u == 0u) {
        let row = z * M + m0 + sm;
        { let at = (row + 0u) * N + n0 + sn + 0u; coopStoreT(acc0_0, &c[at], N); }
        { let at = (row + 0u) * N + n0 + sn + 16u; coopStoreT(acc0_1, &c[at], N); }
        { let at = (row + 0u) * N + n0 + sn + 32u; coopStoreT(acc0_2, &c[at], N); }
        { let at = (row + 0u) * N + n0 + sn + 48u; coopStoreT(acc0_3, &c[at], N); }
        { let at = (row + 16u) * N + n0 + sn + 0u; coopStoreT(acc1_0, &c[at], N); }
        { let at = (row + 16u) * N + n0 + sn + 16u; coopStoreT(acc1_1, &c[at], N); }
        { let at = (row + 16u) * N + n0 + sn + 32u; coopStoreT(acc1_2, &c[at], N); }
        { let at = (row + 16u) * N + n0 + sn + 48u; coopStoreT(acc1_3, &c[at], N); }
        { let at = (row + 32u) * N + n0 + sn + 0u; coopStoreT(acc2_0, &c[at], N); }
        { let at = (row + 32u) * N + n0 + sn + 16u; coopStoreT(acc2_1, &c[at], N); }
        { let at = (row + 32u) * N + n0 + sn + 32u; coopStoreT(acc2_2, &c[at], N); }
        { let at = (row + 32u) * N + n0 + sn + 48u; coopStoreT(acc2_3, &c[at], N); }
        { let at = (row + 48u) * N + n0 + sn + 0u; coopStoreT(acc3_0, &c[at], N); }
        { let at = (row + 48u) * N + n0 + sn + 16u; coopStoreT(acc3_1, &c[at], N); }
        { let at = (row + 48u) * N + n0 + sn + 32u; coopStoreT(acc3_2, &c[at], N); }
        { let at = (row + 48u) * N + n0 + sn + 48u; coopStoreT(acc3_3, &c[at], N); }
        return;
    }
    { let at = sg * 256u; coopStoreT(acc0_0, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 0u + e / 16u; let gn = n0 + sn + 0u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc0_1, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 0u + e / 16u; let gn = n0 + sn + 16u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc0_2, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 0u + e / 16u; let gn = n0 + sn + 32u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc0_3, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 0u + e / 16u; let gn = n0 + sn + 48u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc1_0, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 16u + e / 16u; let gn = n0 + sn + 0u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc1_1, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 16u + e / 16u; let gn = n0 + sn + 16u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc1_2, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 16u + e / 16u; let gn = n0 + sn + 32u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc1_3, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 16u + e / 16u; let gn = n0 + sn + 48u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc2_0, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 32u + e / 16u; let gn = n0 + sn + 0u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc2_1, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 32u + e / 16u; let gn = n0 + sn + 16u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc2_2, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 32u + e / 16u; let gn = n0 + sn + 32u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc2_3, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 32u + e / 16u; let gn = n0 + sn + 48u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc3_0, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 48u + e / 16u; let gn = n0 + sn + 0u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc3_1, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 48u + e / 16u; let gn = n0 + sn + 16u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc3_2, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 48u + e / 16u; let gn = n0 + sn + 32u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
    { let at = sg * 256u; coopStoreT(acc3_3, &Cs[at], 16u); }
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {
        let gm = m0 + sm + 48u + e / 16u; let gn = n0 + sn + 48u + e % 16u;
        if (gm < M && gn < N) { c[(z * M + gm) * N + gn] = (Cs[sg * 256u + e]); }
    }
    workgroupBarrier();
}
