//! Optimisers on the GPU against the CPU: the fused Adam/AdamW and SGD steps over
//! several steps and parameter shapes (pending gradients included), the kernels a
//! step records, and gradient clipping without a host sync. Runs on any
//! Vulkan/Metal/DX12 adapter (Mesa's lavapipe on machines without a GPU).
#![cfg(feature = "gpu")]

use volta::RawTensor;
use volta::layout::Layout;
use volta::optim::{AdamInput, AdamStep, SgdStep, clip_grad_norm};
use volta::prelude::*;

// Tests share one GPU queue; running them one at a time keeps the counters exact.

fn lock() -> std::sync::RwLockWriteGuard<'static, ()> {
    crate::support::gpu_alone()
}

/// A model of three parameters: a matrix whose element count is not a multiple of
/// the workgroup size, a vector and one that spans several workgroups.
type Params<D> = (
    Tensor<(usize, usize), D>,
    Tensor<(usize,), D>,
    Tensor<(usize,), D>,
);

const DIMS: [&[usize]; 3] = [&[33, 5], &[7], &[1000]];

fn host(seed: u64, scale: f64) -> Vec<Vec<f32>> {
    let mut rng = Rng::seed(seed);
    DIMS.iter()
        .map(|d| {
            let n = d.iter().product();
            (0..n).map(|_| (rng.normal() * scale) as f32).collect()
        })
        .collect()
}

fn model<D: Backend<f32>>(v: &[Vec<f32>]) -> Params<D> {
    (
        Tensor::from_vec_shaped(v[0].clone(), (33, 5))
            .unwrap()
            .requires_grad(),
        Tensor::from_vec_shaped(v[1].clone(), (7,))
            .unwrap()
            .requires_grad(),
        Tensor::from_vec_shaped(v[2].clone(), (1000,))
            .unwrap()
            .requires_grad(),
    )
}

/// `Σ c·p + Σ p²/2` over the parameters: gradients `c + p`, pending elementwise
/// values on the GPU until something reads them.
fn grads<D: Backend<f32>>(m: &Params<D>, c: &[Vec<f32>]) -> Gradients<D> {
    let c0 = Tensor::<(usize, usize), D>::from_vec_shaped(c[0].clone(), (33, 5)).unwrap();
    let c1 = Tensor::<(usize,), D>::from_vec_shaped(c[1].clone(), (7,)).unwrap();
    let c2 = Tensor::<(usize,), D>::from_vec_shaped(c[2].clone(), (1000,)).unwrap();
    let half = |p: &Tensor<(usize,), D>| p.mul(p).sum_all().mul_scalar(0.5);
    let loss =
        m.0.mul(&c0)
            .sum_all()
            .add(&m.1.mul(&c1).sum_all())
            .add(&m.2.mul(&c2).sum_all())
            .add(&half(&m.1))
            .add(&half(&m.2));
    loss.backward()
}

fn values<D: Backend<f32>>(m: &Params<D>) -> Vec<Vec<f32>> {
    vec![m.0.to_vec(), m.1.to_vec(), m.2.to_vec()]
}

/// `steps` steps of `opt` from the same start and gradient coefficients.
fn train<D: Backend<f32>, O: Optimizer<D, f32>>(mut opt: O, steps: usize) -> Vec<Vec<f32>> {
    let mut m = model::<D>(&host(1, 1.0));
    for s in 0..steps {
        let g = grads(&m, &host(100 + s as u64, 1.0));
        opt.step(&mut m, &g);
    }
    values(&m)
}

/// A named case: the same optimiser for each device.
type Pair<C, G> = (&'static str, fn() -> (C, G));

fn close(what: &str, cpu: &[Vec<f32>], gpu: &[Vec<f32>]) {
    for (c, g) in cpu.iter().zip(gpu) {
        assert_eq!(c.len(), g.len());
        for (i, (a, b)) in c.iter().zip(g).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + a.abs()),
                "{what}: element {i}: cpu {a} vs gpu {b}"
            );
        }
    }
}

fn adam_l2<D: Backend<f32>>() -> Adam<D> {
    Adam::new(0.02)
        .with_betas(0.8, 0.99)
        .with_eps(1e-6)
        .with_weight_decay(0.1)
}

#[test]
fn fused_adam_matches_the_cpu_over_several_steps() {
    let _g = lock();
    for fusion in [true, false] {
        Gpu::set_fusion(fusion);
        let cases: [Pair<Adam<Cpu>, Adam<Gpu>>; 4] = [
            ("adam", || (Adam::new(0.01), Adam::new(0.01))),
            ("adam l2", || (adam_l2(), adam_l2())),
            ("adamw", || (Adam::adamw(0.02, 0.1), Adam::adamw(0.02, 0.1))),
            ("adamw betas", || {
                (
                    Adam::adamw(0.05, 0.3).with_betas(0.5, 0.9),
                    Adam::adamw(0.05, 0.3).with_betas(0.5, 0.9),
                )
            }),
        ];
        for (name, make) in cases {
            let (cpu, gpu) = make();
            let want = train::<Cpu, _>(cpu, 6);
            let got = train::<Gpu, _>(gpu, 6);
            close(&format!("{name}, fusion {fusion}"), &want, &got);
        }
    }
    Gpu::set_fusion(true);
}

/// Dispatches recorded by one step of `opt` plus the realisation of the parameters
/// it updated, with the gradients already in memory (nothing the step leaves, the
/// optimiser state included, may still be pending).
fn kernels_per_step<O: Optimizer<Gpu, f32>>(opt: &mut O, steps: usize) -> Vec<u64> {
    let mut m = model::<Gpu>(&host(1, 1.0));
    let mut counts = Vec::new();
    for s in 0..steps {
        let g = grads(&m, &host(100 + s as u64, 1.0));
        for p in [g.get(&m.0).unwrap().raw().clone()]
            .into_iter()
            .chain([g.get(&m.1).unwrap().raw().clone()])
            .chain([g.get(&m.2).unwrap().raw().clone()])
        {
            p.buffer().realize();
        }
        let before = Gpu::dispatches_recorded();
        let waits = Gpu::host_waits();
        opt.step(&mut m, &g);
        m.0.raw().buffer().realize();
        m.1.raw().buffer().realize();
        m.2.raw().buffer().realize();
        counts.push(Gpu::dispatches_recorded() - before);
        for (name, t) in opt.state().tensors {
            assert!(!t.buffer().is_pending(), "{name} was left pending");
        }
        assert_eq!(Gpu::host_waits(), waits, "a step synchronised");
    }
    counts
}

/// Parameters one multi-tensor Adam launch steps on this adapter: seven bindings
/// each besides the parameter block, at most 32.
fn adam_per_launch() -> usize {
    let bindings = Gpu::info().expect("a GPU").max_storage_buffers_per_kernel as usize;
    (bindings.saturating_sub(1) / 7).min(32)
}

/// Launches of `n` parameters' Adam step: one per parameter where an adapter
/// binds too few buffers for two.
fn adam_launches(n: usize) -> u64 {
    match adam_per_launch() {
        0 | 1 => n as u64,
        k => n.div_ceil(k) as u64,
    }
}

#[test]
fn an_adam_step_is_one_kernel_for_a_models_parameters() {
    let _g = lock();
    for mut opt in [Adam::<Gpu>::new(0.01), Adam::adamw(0.01, 0.1)] {
        let counts = kernels_per_step(&mut opt, 3);
        println!(
            "adam kernels per step (3 parameters, {} to a launch): {counts:?}",
            adam_per_launch()
        );
        assert_eq!(counts, vec![adam_launches(3); 3]);
    }
}

#[test]
fn many_parameters_step_as_on_the_cpu() {
    let _g = lock();
    // 40 parameters (two launches of up to 32), of sizes around a workgroup's 256.
    let sizes: Vec<usize> = (0..40)
        .map(|i| [1, 255, 256, 257, 1000, 33][i % 6] + i)
        .collect();
    steps_as_on_the_cpu(&sizes);
}

#[test]
fn parameters_in_fours_step_as_on_the_cpu() {
    let _g = lock();
    // Every length a multiple of 4: the launches step four elements a thread
    // (as vec4s).
    let sizes: Vec<usize> = (0..40)
        .map(|i| [4, 252, 256, 260, 1000, 32][i % 6] + 4 * i)
        .collect();
    steps_as_on_the_cpu(&sizes);
}

/// Steps parameters of `sizes` in Adam's multi-tensor launches and one at a time
/// on the GPU, and on the CPU, and compares: half on their first step (no
/// moments), each with its own step count.
fn steps_as_on_the_cpu(sizes: &[usize]) {
    // In memory, as parameters and their state are (uniform numbers are drawn
    // by the kernels that read them, and a step's kernel reads memory).
    let t = |dims: &[usize], seed: u64| {
        let x = RawTensor::<Gpu, f32>::uniform(dims, seed);
        x.buffer().realize();
        x
    };
    let tensors: Vec<[RawTensor<Gpu, f32>; 4]> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let s = 10 * i as u64;
            [t(&[n], s), t(&[n], s + 1), t(&[n], s + 2), t(&[n], s + 3)]
        })
        .collect();
    let steps: Vec<AdamInput<'_, Gpu, f32>> = tensors
        .iter()
        .enumerate()
        .map(|(i, [p, g, m, v])| AdamInput {
            p: p.view(),
            g: g.view(),
            moments: (i % 2 == 1).then(|| (m.view(), v.view())),
            hyper: AdamStep::at_step(0.01, (0.9, 0.99), 1e-8, 0.1, i % 3 == 0, 1 + i as i32),
        })
        .collect();
    let before = Gpu::dispatches_recorded();
    let together = <Gpu as Backend<f32>>::adam_steps(&steps);
    let read = |b: &<Gpu as volta::backend::Memory<f32>>::Buffer, n: usize| {
        RawTensor::<Gpu, f32>::leaf(b.clone(), Layout::contiguous(&[n])).to_vec()
    };
    let results: Vec<[Vec<f32>; 3]> = together
        .iter()
        .zip(sizes)
        .map(|((p, m, v), &n)| [read(p, n), read(m, n), read(v, n)])
        .collect();
    let launches = Gpu::dispatches_recorded() - before;
    assert_eq!(
        launches,
        adam_launches(40),
        "launches of 40 parameters' step"
    );
    for (i, (s, want)) in steps.iter().zip(&results).enumerate() {
        let n = sizes[i];
        let (p, m, v) = <Gpu as Backend<f32>>::adam_step(s.p, s.g, s.moments, &s.hyper);
        let alone = [read(&p, n), read(&m, n), read(&v, n)];
        let cpu: [RawTensor<Cpu, f32>; 4] =
            std::array::from_fn(|j| RawTensor::from_vec(tensors[i][j].to_vec(), &[n]));
        let moments = s.moments.map(|_| (cpu[2].view(), cpu[3].view()));
        let (p, m, v) =
            <Cpu as Backend<f32>>::adam_step(cpu[0].view(), cpu[1].view(), moments, &s.hyper);
        let on_cpu = [p, m, v].map(|b| RawTensor::<Cpu, f32>::leaf(b, Layout::contiguous(&[n])));
        for (k, what) in ["p", "m", "v"].into_iter().enumerate() {
            let c = on_cpu[k].to_vec();
            for (j, ((x, y), z)) in c.iter().zip(&want[k]).zip(&alone[k]).enumerate() {
                for (how, got) in [("together", y), ("alone", z)] {
                    assert!(
                        (x - got).abs() <= 1e-5 * (1.0 + x.abs()),
                        "parameter {i} ({n} elements), {what}[{j}]: CPU {x}, GPU {how} {got}"
                    );
                }
            }
        }
    }
}

fn nesterov_wd<D: Backend<f32>>() -> Sgd<D> {
    Sgd::new(0.05)
        .with_momentum(0.9)
        .with_nesterov(true)
        .with_weight_decay(0.1)
}

#[test]
fn sgd_matches_the_cpu_over_several_steps() {
    let _g = lock();
    let cases: [Pair<Sgd<Cpu>, Sgd<Gpu>>; 4] = [
        ("plain", || (Sgd::new(0.1), Sgd::new(0.1))),
        ("momentum", || {
            (
                Sgd::new(0.1).with_momentum(0.9).with_weight_decay(0.01),
                Sgd::new(0.1).with_momentum(0.9).with_weight_decay(0.01),
            )
        }),
        ("nesterov", || {
            (
                Sgd::new(0.05).with_momentum(0.8).with_nesterov(true),
                Sgd::new(0.05).with_momentum(0.8).with_nesterov(true),
            )
        }),
        ("nesterov wd", || (nesterov_wd(), nesterov_wd())),
    ];
    for (name, make) in cases {
        let (cpu, gpu) = make();
        close(name, &train::<Cpu, _>(cpu, 5), &train::<Gpu, _>(gpu, 5));
    }
}

#[test]
fn an_sgd_step_is_one_kernel_per_parameter() {
    let _g = lock();
    let mut opt = Sgd::<Gpu>::new(0.1).with_momentum(0.9).with_nesterov(true);
    let counts = kernels_per_step(&mut opt, 3);
    println!("nesterov sgd kernels per step (3 parameters): {counts:?}");
    assert_eq!(counts, vec![3, 3, 3]);
}

#[test]
fn clipping_matches_the_cpu_and_does_not_sync() {
    let _g = lock();
    let cpu_model = model::<Cpu>(&host(1, 1.0));
    let gpu_model = model::<Gpu>(&host(1, 1.0));
    let coef = host(7, 3.0);
    let mut cg = grads(&cpu_model, &coef);
    let mut gg = grads(&gpu_model, &coef);
    Gpu::sync().unwrap();
    let waits = Gpu::host_waits();
    let cpu_norm = clip_grad_norm(&mut cg, 1.5);
    let dispatches = Gpu::dispatches_recorded();
    let gpu_norm = clip_grad_norm(&mut gg, 1.5);
    let clip = Gpu::dispatches_recorded() - dispatches;
    let mut opt = Adam::<Gpu>::new(0.01);
    let mut stepped = gpu_model.clone();
    opt.step(&mut stepped, &gg);
    println!(
        "clip_grad_norm over 3 gradients: {clip} kernels recorded, {} with the Adam step",
        Gpu::dispatches_recorded() - dispatches
    );
    assert_eq!(
        Gpu::host_waits(),
        waits,
        "clipping synchronised with the host"
    );
    let (c, g) = (cpu_norm.item(), gpu_norm.item());
    assert!((c - g).abs() <= 1e-5 * c, "norm: cpu {c} vs gpu {g}");
    assert!(c > 1.5, "the test clips: norm {c}");
    let read = |gr: &Gradients<Cpu>, m: &Params<Cpu>| {
        vec![
            gr.get(&m.0).unwrap().to_vec(),
            gr.get(&m.1).unwrap().to_vec(),
            gr.get(&m.2).unwrap().to_vec(),
        ]
    };
    let read_gpu = |gr: &Gradients<Gpu>, m: &Params<Gpu>| {
        vec![
            gr.get(&m.0).unwrap().to_vec(),
            gr.get(&m.1).unwrap().to_vec(),
            gr.get(&m.2).unwrap().to_vec(),
        ]
    };
    let (cv, gv) = (read(&cg, &cpu_model), read_gpu(&gg, &gpu_model));
    close("clipped gradients", &cv, &gv);
    let norm: f64 = cv
        .iter()
        .flatten()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    assert!((norm - 1.5).abs() < 1e-4, "clipped norm {norm}");
}

/// `adam_step` and `sgd_step` through `Backend`, with views for inputs: a slice
/// at an offset, a transposed gradient, a pending moment.
fn fused_on_views<D: Backend<f32>>(lr: f64) -> Vec<Vec<f32>> {
    let h = host(3, 1.0);
    let raw = |v: &[f32], dims: &[usize]| RawTensor::<D, f32>::from_vec(v.to_vec(), dims);
    // p: rows 3..10 of a (33, 5) matrix (offset 15); g: a transposed (5, 7) one.
    let p = raw(&h[0], &[33, 5]).narrow(0, 3, 7);
    let g = raw(&h[2][..35], &[5, 7]).permute(&[1, 0]);
    let m = raw(&h[2][100..135], &[7, 5]);
    let v = raw(&h[2][200..235], &[7, 5])
        .unary(volta_kernels::UnaryOp::Abs)
        .scalar(volta_kernels::BinaryOp::Add, 0.5);
    let mut out = Vec::new();
    for decoupled in [false, true] {
        let hyper = AdamStep::at_step(lr, (0.9, 0.999), 1e-8, 0.05, decoupled, 3);
        let (p2, m2, v2) = D::adam_step(p.view(), g.view(), Some((m.view(), v.view())), &hyper);
        for b in [p2, m2, v2] {
            out.push(D::to_vec(&b, &volta::backend::Layout::contiguous(&[35])));
        }
        let (p2, ..) = D::adam_step(p.view(), g.view(), None, &hyper);
        out.push(D::to_vec(&p2, &volta::backend::Layout::contiguous(&[35])));
    }
    let sgd = SgdStep {
        lr,
        momentum: 0.9,
        weight_decay: 0.01,
        nesterov: true,
    };
    let (p2, b2) = D::sgd_step(p.view(), g.view(), Some(m.view()), &sgd);
    let flat = volta::backend::Layout::contiguous(&[35]);
    out.push(D::to_vec(&p2, &flat));
    out.push(D::to_vec(&b2.unwrap(), &flat));
    let plain = SgdStep {
        momentum: 0.0,
        nesterov: false,
        ..sgd
    };
    let (p2, b2) = D::sgd_step(p.view(), g.view(), None, &plain);
    assert!(b2.is_none());
    out.push(D::to_vec(&p2, &flat));
    out
}

#[test]
fn fused_steps_read_views_and_reuse_their_kernels() {
    let _g = lock();
    close(
        "views",
        &fused_on_views::<Cpu>(0.01),
        &fused_on_views::<Gpu>(0.01),
    );
    // A new learning rate is a new parameter, not a new kernel.
    let compiled = Gpu::pipelines_compiled();
    close(
        "views",
        &fused_on_views::<Cpu>(0.5),
        &fused_on_views::<Gpu>(0.5),
    );
    assert_eq!(Gpu::pipelines_compiled(), compiled);
}
