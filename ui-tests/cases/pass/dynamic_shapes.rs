// The same op families on run-time (`usize`) dims build, and mix with static dims.
use volta::prelude::*;

fn main() {
    let mut rng = Rng::seed(3);
    let n: usize = 5; // e.g. a batch size only known at run time.

    // matmul: a dynamic batch times a static weight; dynamic inner dims are run-time checked.
    let x = Tensor::<(usize, Const<4>)>::randn_shaped((n, Const), &mut rng);
    let w = Tensor::<Rank2<4, 3>>::randn(&mut rng).requires_grad();
    let h: Tensor<(usize, Const<3>)> = x.matmul(&w);
    assert_eq!(h.dims(), &[5, 3]);
    let k = 4;
    let y = Tensor::<(usize, usize)>::ones_shaped((n, k));
    let _: Tensor<(usize, Const<3>)> = y.matmul(&w);
    let xb = Tensor::<(usize, Const<2>, Const<4>)>::ones_shaped((n, Const, Const));
    let _: Tensor<(usize, Const<2>, Const<3>)> = xb.matmul(&w);

    // elementwise between static and dynamic dims of equal run-time size.
    let hs = Tensor::<(Const<5>, Const<3>)>::ones();
    let sum = &h + &hs;
    assert_eq!(sum.mul(&h).add_scalar(1.0).dims(), &[5, 3]);

    // reductions and keep-dim on dynamic shapes.
    let per_row: Tensor<(usize,)> = h.sum::<_, Axis<1>>();
    assert_eq!(per_row.dims(), &[5]);
    let per_col: Tensor<(Const<3>,)> = h.mean();
    let _: Tensor<(Const<1>, Const<3>)> = h.max_keepdim::<Axis<0>>();
    let _ = h.log_softmax::<Axis<1>>();

    // broadcast_to, expand_to, permute, reshape_to, realize.
    let b: Tensor<(usize, Const<3>)> = per_col.broadcast_to::<_, Axis<0>>((n, Const));
    let col = Tensor::<(usize, Const<1>)>::ones_shaped((n, Const));
    let _: Tensor<(usize, Const<3>)> = col.expand_to((n, Const));
    let ht: Tensor<(Const<3>, usize)> = h.permute::<_, Axes2<1, 0>>();
    let flat = ht.reshape_to((15usize,)).unwrap();
    assert!(ht.reshape_to((16usize,)).is_err());
    let fixed: Tensor<Rank1<15>> = flat.realize().unwrap();
    assert_eq!(fixed.dims(), &[15]);

    // concat, pad, shrink, stride, slice with a dynamic axis.
    let cat: Tensor<(usize, Const<3>)> = h.concat::<Axis<0>, _, _>(&b);
    assert_eq!(cat.dims(), &[10, 3]);
    let padded: Tensor<(usize, Const<3>)> = h.pad::<Axis<0>, 1, 1, _>(0.0);
    assert_eq!(padded.dims(), &[7, 3]);
    let shrunk: Tensor<(usize, Const<3>)> = padded.shrink::<Axis<0>, 1, _>();
    assert_eq!(shrunk.dims(), &[6, 3]);
    let strided: Tensor<(usize, Const<3>)> = cat.stride::<Axis<0>, 3, _>();
    assert_eq!(strided.dims(), &[4, 3]);
    assert_eq!(h.slice::<Axis<0>>(1..4).dims(), &[3, 3]);

    // gather with a dynamic index, index_select with dynamic ids.
    let idx =
        Tensor::<(usize, Const<1>), Cpu, u32>::from_vec_shaped(vec![0; n], (n, Const)).unwrap();
    let _: Tensor<(usize, Const<1>)> = h.gather::<Axis<1>, _>(&idx);
    let ids = Tensor::<(usize,), Cpu, u32>::from_vec_shaped(vec![2, 0], (2,)).unwrap();
    let rows: Tensor<(usize, Const<3>)> = h.index_select(&ids);
    assert_eq!(rows.dims(), &[2, 3]);

    // backward through dynamic shapes to a static parameter.
    let grads = h.relu().sum_all().backward();
    let gw: Tensor<Rank2<4, 3>> = grads.get(&w).unwrap();
    assert_eq!(gw.dims(), &[4, 3]);
}
