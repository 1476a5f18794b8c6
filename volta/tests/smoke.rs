use volta::prelude::*;

#[test]
fn matmul_relu_backward() {
    let x = Tensor::<Rank2<2, 3>>::from_array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]);
    let w =
        Tensor::<Rank2<3, 2>>::from_array([[1.0, 0.5], [0.0, -1.0], [2.0, 1.0]]).requires_grad();
    let y: Tensor<Rank2<2, 2>> = x.matmul(&w);
    assert_eq!(y.to_vec(), vec![7.0, 5.5, -8.0, -9.0]);
    let loss = y.relu().sum_all();
    let g = loss.backward().get(&w).unwrap();
    // d/dw = xᵀ · mask; mask = [[1,1],[0,0]]
    assert_eq!(g.to_vec(), vec![1.0, 1.0, -2.0, -2.0, 3.0, 3.0]);
}

#[test]
fn broadcast_reduce_softmax() {
    let b = Tensor::<Rank1<3>>::from_array([1.0, 2.0, 3.0]).requires_grad();
    let x: Tensor<Rank2<2, 3>> = b.broadcast();
    let s: Tensor<Rank1<2>> = x.sum();
    assert_eq!(s.to_vec(), vec![6.0, 6.0]);
    let sm = x.softmax::<Axis<1>>();
    let v = sm.to_vec();
    assert!((v[0] + v[1] + v[2] - 1.0).abs() < 1e-6);
    let g = s.sum_all().backward().get(&b).unwrap();
    assert_eq!(g.to_vec(), vec![2.0, 2.0, 2.0]);
}

#[test]
fn permute_reshape_cat_pad() {
    let x = Tensor::<Rank2<2, 3>>::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    assert_eq!(x.t().to_vec(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    let r: Tensor<Rank1<6>> = x.t().reshape();
    assert_eq!(r.to_vec(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    let c: Tensor<Rank2<4, 3>> = x.concat::<Axis<0>, _, _>(&x);
    assert_eq!(c.dims(), &[4, 3]);
    let p: Tensor<Rank2<2, 5>> = x.pad::<Axis<1>, 1, 1, _>(0.0);
    assert_eq!(
        p.to_vec(),
        vec![0.0, 1.0, 2.0, 3.0, 0.0, 0.0, 4.0, 5.0, 6.0, 0.0]
    );
    let s: Tensor<Rank2<2, 2>> = x.shrink::<Axis<1>, 1, _>();
    assert_eq!(s.to_vec(), vec![2.0, 3.0, 5.0, 6.0]);
    let st: Tensor<Rank2<2, 2>> = x.stride::<Axis<1>, 2, _>();
    assert_eq!(st.to_vec(), vec![1.0, 3.0, 4.0, 6.0]);
}

/// Generic code over a batch dim adds tensors without extra bounds.
fn add_rows<B: Dim>(a: &Tensor<(B, Const<3>)>, b: &Tensor<(B, Const<3>)>) -> Tensor<(B, Const<3>)> {
    a + b
}

#[test]
fn generic_batch_dim_needs_no_extra_bounds() {
    let a = Tensor::<(usize, Const<3>)>::ones_shaped((2, Const));
    assert_eq!(add_rows(&a, &a).to_vec(), vec![2.0; 6]);
    let s = Tensor::<Rank2<1, 3>>::ones();
    assert_eq!(add_rows(&s, &s).to_vec(), vec![2.0; 3]);
}

/// `backward_with` hands each leaf's gradient over as soon as its last user has
/// passed its gradient back: the last layer's weight before the first layer's
/// (data-parallel training starts its all-reduce there), each leaf once, and the
/// same gradients as `backward`.
#[test]
fn backward_with_hands_over_leaves_closest_to_the_loss_first() {
    let mut rng = Rng::seed(3);
    let layers: Vec<Linear<4, 4>> = (0..4).map(|_| Linear::new(&mut rng)).collect();
    let x = Tensor::<Rank2<2, 4>>::randn(&mut rng);
    let forward = || {
        let mut h = x.clone();
        for l in &layers {
            h = l.forward(&h).tanh();
        }
        // The first layer's weight is used twice: its gradient is whole only after
        // both uses have passed theirs back.
        (h + layers[0].weight.sum_all().broadcast::<Rank2<2, 4>, _>())
            .square()
            .sum_all()
    };
    let mut seen = Vec::new();
    let grads = forward()
        .raw()
        .clone()
        .backward_with(&mut |id, g| seen.push((id, g.to_vec())));
    let weights: Vec<volta::TensorId> = layers.iter().map(|l| l.weight.id()).collect();
    let at = |id| {
        seen.iter()
            .position(|(s, _)| *s == id)
            .expect("every weight is handed over")
    };
    for k in 1..4 {
        assert!(
            at(weights[k]) < at(weights[k - 1]),
            "layer {k} after layer {}",
            k - 1
        );
    }
    let plain = forward().backward();
    assert_eq!(seen.len(), plain.len(), "each leaf once");
    for (id, g) in &seen {
        assert_eq!(plain.get_raw(*id).unwrap().to_vec(), *g);
        assert_eq!(grads.get_raw(*id).unwrap().to_vec(), *g);
    }
}
