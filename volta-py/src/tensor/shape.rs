//! Run-time shape rules, checked before Volta is called so that a mistake is a
//! `ShapeError` (a `ValueError`) naming the op and both shapes, or an `IndexError`
//! naming the axis, rather than a panic inside the kernels.
use crate::errors;
use pyo3::PyResult;
use pyo3::exceptions::{PyIndexError, PyValueError};

/// numpy's broadcast of two shapes: aligned at the right, each pair equal or one 1.
pub fn broadcast(op: &str, a: &[usize], b: &[usize]) -> PyResult<Vec<usize>> {
    let rank = a.len().max(b.len());
    let at = |d: &[usize], i: usize| {
        let pad = rank - d.len();
        if i < pad { 1 } else { d[i - pad] }
    };
    (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            _ => Err(errors::error(
                errors::Kind::Shape,
                format!(
                    "{op}: shapes {a:?} and {b:?} do not broadcast (axis {i} of the aligned shapes)"
                ),
            )),
        })
        .collect()
}

/// Whether `from` broadcasts to `to` (numpy's rule, one way).
pub fn broadcasts_to(from: &[usize], to: &[usize]) -> bool {
    from.len() <= to.len()
        && from
            .iter()
            .rev()
            .zip(to.iter().rev())
            .all(|(&f, &t)| f == t || f == 1)
}

/// A possibly negative axis of a rank-`rank` tensor, as an index. A 0-d tensor
/// takes dim 0 or −1 (as in PyTorch: a reduction or softmax of its one element);
/// callers that index its dims use [`real_axis`].
pub fn axis(op: &str, axis: isize, rank: usize) -> PyResult<usize> {
    let r = rank as isize;
    let a = if axis < 0 { axis + r.max(1) } else { axis };
    if a < 0 || a >= r.max(1) {
        return Err(PyIndexError::new_err(format!(
            "{op}: dim {axis} is out of range for a tensor of rank {rank} (expected {} to {})",
            -r.max(1),
            r.max(1) - 1
        )));
    }
    Ok(a as usize)
}

/// [`axis`] for an op that needs an axis of the tensor's dims (`size`, `narrow`,
/// `split`, `cat`): a 0-d tensor has none.
pub fn real_axis(op: &str, axis: isize, rank: usize) -> PyResult<usize> {
    if rank == 0 {
        return Err(PyIndexError::new_err(format!(
            "{op}: dim {axis} is out of range for a 0-d tensor (it has no dims)"
        )));
    }
    self::axis(op, axis, rank)
}

/// Distinct axes from a list (negative allowed), sorted.
pub fn axes(op: &str, list: &[isize], rank: usize) -> PyResult<Vec<usize>> {
    let mut out = list
        .iter()
        .map(|&a| axis(op, a, rank))
        .collect::<PyResult<Vec<_>>>()?;
    out.sort_unstable();
    if out.windows(2).any(|w| w[0] == w[1]) {
        return Err(PyValueError::new_err(format!(
            "{op}: dim {list:?} repeats an axis"
        )));
    }
    Ok(out)
}

/// The dims of a reshape to `spec` (one entry may be −1), checked against `numel`.
pub fn reshape(op: &str, from: &[usize], spec: &[isize]) -> PyResult<Vec<usize>> {
    let numel: usize = from.iter().product();
    let bad = || {
        errors::error(
            errors::Kind::Shape,
            format!(
                "{op}: cannot reshape a tensor of shape {from:?} ({numel} elements) to {spec:?}"
            ),
        )
    };
    let mut infer = None;
    let mut known = 1usize;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            -1 if infer.is_none() => infer = Some(i),
            d if d >= 0 => known = known.checked_mul(d as usize).ok_or_else(bad)?,
            _ => return Err(bad()),
        }
    }
    let mut dims: Vec<usize> = spec.iter().map(|&d| d.max(0) as usize).collect();
    if let Some(i) = infer {
        if known == 0 || !numel.is_multiple_of(known) {
            return Err(bad());
        }
        dims[i] = numel / known;
    } else if known != numel {
        return Err(bad());
    }
    Ok(dims)
}

/// Checks that `perm` is a permutation of `0..rank` (negative allowed).
pub fn permutation(op: &str, perm: &[isize], rank: usize) -> PyResult<Vec<usize>> {
    if perm.len() != rank {
        return Err(PyValueError::new_err(format!(
            "{op}: {perm:?} names {} axes, the tensor has {rank}",
            perm.len()
        )));
    }
    let out = perm
        .iter()
        .map(|&a| axis(op, a, rank))
        .collect::<PyResult<Vec<_>>>()?;
    let mut seen = vec![false; rank];
    for &a in &out {
        if std::mem::replace(&mut seen[a], true) {
            return Err(PyValueError::new_err(format!(
                "{op}: {perm:?} repeats axis {a}"
            )));
        }
    }
    Ok(out)
}

/// The result dims of `a @ b` (numpy's matmul rules: 1-D operands promoted, batch
/// dims broadcast), or a `ShapeError` naming both shapes.
pub fn matmul(a: &[usize], b: &[usize]) -> PyResult<Vec<usize>> {
    if a.is_empty() || b.is_empty() {
        return Err(errors::error(
            errors::Kind::Shape,
            format!("matmul: operands must have at least one dim, got shapes {a:?} and {b:?}"),
        ));
    }
    let k_a = a[a.len() - 1];
    let k_b = if b.len() == 1 { b[0] } else { b[b.len() - 2] };
    if k_a != k_b {
        return Err(errors::error(
            errors::Kind::Shape,
            format!(
                "matmul: shapes {a:?} and {b:?} do not fit (inner dims {k_a} and {k_b} differ)"
            ),
        ));
    }
    let batch_a = if a.len() > 2 {
        &a[..a.len() - 2]
    } else {
        &[][..]
    };
    let batch_b = if b.len() > 2 {
        &b[..b.len() - 2]
    } else {
        &[][..]
    };
    let mut out = broadcast("matmul", batch_a, batch_b).map_err(|_| {
        errors::error(
            errors::Kind::Shape,
            format!("matmul: shapes {a:?} and {b:?} have batch dims that do not broadcast"),
        )
    })?;
    if a.len() >= 2 {
        out.push(a[a.len() - 2]);
    }
    if b.len() >= 2 {
        out.push(b[b.len() - 1]);
    }
    Ok(out)
}
