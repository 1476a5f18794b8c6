//! `volta.datasets`: the bundled UCI digits, split exactly as the Rust main job
//! splits them (the same reader, the same seeded split), so a model trained from
//! Python is measured on the main job's test images.
use crate::errors::{self, Kind};
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use volta::Rng;
use volta::data::readers::digits;

/// The bundled file (57 KB), inside the module so an installed wheel has it.
const DIGITS: &[u8] = include_bytes!("../../data/digits.csv.gz");

/// One labelled set as `(images (N, 1, 8, 8) float32, labels (N,) int64)`.
type Split<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>);
/// `(x_train, y_train, x_test, y_test)`.
type Splits<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
);

/// The UCI digits (1,797 images of 1×8×8, pixels 0–16 scaled to [0, 1], labels
/// 0–9) split into `(x_train, y_train, x_test, y_test)` numpy arrays: the split
/// `cargo run --release -- --seed SEED` trains and tests on (`test_fraction` 0.2).
#[pyfunction]
#[pyo3(signature = (test_fraction=0.2, seed=0, path=None))]
pub fn load_digits<'py>(
    py: Python<'py>,
    test_fraction: f64,
    seed: u64,
    path: Option<std::path::PathBuf>,
) -> PyResult<Splits<'py>> {
    if !(0.0..1.0).contains(&test_fraction) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "load_digits: test_fraction must be in [0, 1), got {test_fraction}"
        )));
    }
    let data = match &path {
        Some(p) => digits::load(p),
        None => digits::load_bytes("digits.csv.gz", DIGITS),
    }
    .map_err(|e| errors::error(Kind::FileFormat, e.to_string()))?;
    let (train, test) = data.split(test_fraction, &mut Rng::seed(seed));
    let arrays = |set: &volta::data::Labelled| -> PyResult<Split<'py>> {
        let mut dims = vec![set.len()];
        dims.extend_from_slice(set.dims());
        let x = PyArray1::from_slice(py, set.features()).reshape(dims)?;
        let y: Vec<i64> = set.labels().iter().map(|&l| i64::from(l)).collect();
        Ok((x.into_any(), PyArray1::from_vec(py, y).into_any()))
    };
    let ((xa, ya), (xb, yb)) = (arrays(&train)?, arrays(&test)?);
    Ok((xa, ya, xb, yb))
}
