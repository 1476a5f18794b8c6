// Every op family, used correctly on static shapes, builds and computes the expected values.
use volta::prelude::*;

fn main() {
    let mut rng = Rng::seed(7);

    // matmul: 2-D, vector × matrix, batched, shared weight, batched heads.
    let a = Tensor::<Rank2<2, 3>>::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    let b = Tensor::<Rank2<3, 2>>::ones();
    let ab: Tensor<Rank2<2, 2>> = a.matmul(&b);
    assert_eq!(ab.to_vec(), vec![6.0, 6.0, 15.0, 15.0]);
    let v: Tensor<Rank1<2>> = Tensor::<Rank1<3>>::ones().matmul(&b);
    assert_eq!(v.to_vec(), vec![3.0, 3.0]);
    let x3 = Tensor::<Rank3<4, 2, 3>>::randn(&mut rng);
    let _: Tensor<Rank3<4, 2, 5>> = x3.matmul(&Tensor::<Rank3<4, 3, 5>>::randn(&mut rng));
    let _: Tensor<Rank3<4, 2, 5>> = x3.matmul(&Tensor::<Rank2<3, 5>>::randn(&mut rng));
    let q = Tensor::<Rank4<2, 4, 8, 16>>::randn(&mut rng);
    let k = Tensor::<Rank4<2, 4, 8, 16>>::randn(&mut rng);
    let scores: Tensor<Rank4<2, 4, 8, 8>> = q.matmul(&k.permute::<_, Axes4<0, 1, 3, 2>>());

    // elementwise: methods, operators (refs, owned, scalars), unary, compare, select.
    let s = a
        .add(&a)
        .sub(&a)
        .mul(&a)
        .div(&a)
        .maximum(&a)
        .minimum(&a)
        .pow(&a);
    let t = &a + &a - a.clone() * &a / a.clone() + 1.0;
    let u = (t.exp().log().sqrt().relu().sigmoid().tanh().gelu().silu() % 2.0).abs();
    let mask = s.gt(&u);
    let _: Tensor<Rank2<2, 3>> = mask.select(&s, &u.neg());
    assert_eq!(a.square().sum_all().item(), 91.0);

    // reductions: drop axes (inferred either way), keep-dim, all, softmax.
    let rows: Tensor<Rank1<2>> = a.sum::<_, Axis<1>>();
    assert_eq!(rows.to_vec(), vec![6.0, 15.0]);
    let _: Tensor<Rank1<3>> = a.max();
    let _: Tensor<Rank0> = a.mean::<_, Axes2<0, 1>>();
    let kept: Tensor<Rank2<2, 1>> = a.sum_keepdim::<Axis<1>>();
    let _ = a.min_keepdim::<Axis<0>>().mean_keepdim::<Axis<1>>();
    let p = scores.softmax::<Axis<3>>();
    assert!((p.sum::<_, Axis<3>>().sum_all().item() - 64.0).abs() < 1e-3);

    // broadcast, expand, permute, transpose, reshape, flatten.
    let bias = Tensor::<Rank1<2>>::from_array([10.0, 20.0]);
    let bb: Tensor<Rank2<3, 2>> = bias.broadcast();
    let _: Tensor<Rank3<2, 4, 3>> = Tensor::<Rank2<2, 3>>::ones().broadcast::<_, Axis<1>>();
    let e: Tensor<Rank2<2, 3>> = kept.expand();
    assert_eq!(e.to_vec(), vec![6.0, 6.0, 6.0, 15.0, 15.0, 15.0]);
    let pt: Tensor<Rank3<3, 4, 2>> = x3.permute::<_, Axes3<2, 0, 1>>();
    let _: Tensor<Rank2<3, 2>> = a.t();
    let r: Tensor<Rank3<1, 6, 1>> = a.reshape();
    let _: Tensor<Rank1<24>> = pt.flatten();
    let _ = r.reshape::<Rank2<3, 2>>().add(&bb);

    // concat, pad, shrink, stride, slice.
    let c: Tensor<Rank2<5, 3>> = a.concat::<Axis<0>, _, _>(&Tensor::<Rank2<3, 3>>::zeros());
    let padded: Tensor<Rank2<2, 6>> = a.pad::<Axis<1>, 1, 2, _>(0.0);
    assert_eq!(padded.to_vec()[..6], [0.0, 1.0, 2.0, 3.0, 0.0, 0.0]);
    let mid: Tensor<Rank2<2, 2>> = padded.shrink::<Axis<1>, 1, _>();
    assert_eq!(mid.to_vec(), vec![1.0, 2.0, 4.0, 5.0]);
    let every2: Tensor<Rank2<3, 3>> = c.stride::<Axis<0>, 2, _>();
    assert_eq!(every2.to_vec()[3..], [0.0; 6]);
    let sl = a.slice::<Axis<1>>(1..3);
    assert_eq!(sl.dims(), &[2, 2]);

    // gather and index_select.
    let idx = Tensor::<Rank2<2, 1>, Cpu, u32>::from_array([[2], [0]]);
    assert_eq!(a.gather::<Axis<1>, _>(&idx).to_vec(), vec![3.0, 4.0]);
    let ids = Tensor::<Rank1<3>, Cpu, u32>::from_array([1, 1, 0]);
    let emb: Tensor<Rank2<3, 3>> = a.index_select(&ids);
    assert_eq!(emb.to_vec()[..3], [4.0, 5.0, 6.0]);

    // backward on a scalar loss; gradients keep the parameter's type.
    let w = Tensor::<Rank2<3, 2>>::ones().requires_grad();
    let loss = a.matmul(&w).relu().sum_all();
    let grads = loss.backward();
    let gw: Tensor<Rank2<3, 2>> = grads.get(&w).unwrap();
    assert_eq!(gw.to_vec(), vec![5.0, 5.0, 7.0, 7.0, 9.0, 9.0]);
    let _no_grad = no_grad();
}
