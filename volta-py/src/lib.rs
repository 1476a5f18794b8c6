//! `volta._volta`: the Rust half of the Python package `volta`.
//!
//! Each file is one Python-facing concept; `python/volta/` re-exports them and adds
//! the pure-Python parts (`nn` modules, optimisers' bookkeeping, the exception
//! classes). Ops call the `volta` crate's run-time-shaped `RawTensor` API: the same
//! kernels, autograd and GPU runtime as typed Rust code, with shapes checked here
//! (as `ShapeError`) instead of by the compiler.
#![warn(missing_docs)]
use pyo3::prelude::*;

mod datasets;
mod device;
mod errors;
mod functional;
mod io;
mod llm;
mod optim;
mod tensor;
mod value;

#[pymodule]
fn _volta(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::install_panic_hook();
    m.add_class::<device::Device>()?;
    m.add_class::<value::Value>()?;
    m.add_class::<tensor::Tensor>()?;
    m.add_class::<tensor::grad::NoGrad>()?;
    m.add_function(wrap_pyfunction!(tensor::grad::is_grad_enabled, m)?)?;
    {
        use tensor::create::*;
        for f in [
            wrap_pyfunction!(tensor_fn, m)?,
            wrap_pyfunction!(from_numpy, m)?,
            wrap_pyfunction!(zeros, m)?,
            wrap_pyfunction!(ones, m)?,
            wrap_pyfunction!(full, m)?,
            wrap_pyfunction!(randn, m)?,
            wrap_pyfunction!(rand, m)?,
            wrap_pyfunction!(uniform, m)?,
            wrap_pyfunction!(arange, m)?,
            wrap_pyfunction!(linspace, m)?,
            wrap_pyfunction!(eye, m)?,
            wrap_pyfunction!(zeros_like, m)?,
            wrap_pyfunction!(ones_like, m)?,
            wrap_pyfunction!(full_like, m)?,
            wrap_pyfunction!(cat, m)?,
            wrap_pyfunction!(stack, m)?,
            wrap_pyfunction!(where_, m)?,
            wrap_pyfunction!(manual_seed, m)?,
        ] {
            m.add_function(f)?;
        }
    }
    m.add_class::<llm::Llama>()?;
    m.add_class::<llm::Tokenizer>()?;
    m.add_class::<llm::Generation>()?;
    m.add_function(wrap_pyfunction!(io::save_file, m)?)?;
    m.add_function(wrap_pyfunction!(io::load_file, m)?)?;
    m.add_function(wrap_pyfunction!(io::load_metadata, m)?)?;
    m.add_function(wrap_pyfunction!(optim::adam_steps, m)?)?;
    m.add_function(wrap_pyfunction!(optim::sgd_step, m)?)?;
    let datasets = PyModule::new(m.py(), "datasets")?;
    datasets.add_function(wrap_pyfunction!(datasets::load_digits, &datasets)?)?;
    m.add_submodule(&datasets)?;
    let functional = PyModule::new(m.py(), "functional")?;
    functional::register(&functional)?;
    m.add_submodule(&functional)?;
    Ok(())
}
