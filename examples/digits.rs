//! Trains a typed MLP (64 → 128 → 10, ReLU) on the UCI optical digits with Adam and
//! mini-batches, and fails unless the test accuracy reaches 90%.
//!
//! ```text
//! cargo run --release --example digits [-- --device auto|cpu|gpu]
//! ```
use std::process::ExitCode;
use std::time::Instant;
use volta::nn::Param;
use volta::nn::loss::cross_entropy;
use volta::prelude::*;
use volta_examples::cli::{DeviceChoice, parse_device, resolve};
use volta_examples::dataset::{self, CLASSES, Dataset, PIXELS};

const HIDDEN: usize = 128;
const BATCH: usize = 32;
const EPOCHS: usize = 20;
const LEARNING_RATE: f64 = 3e-3;
const REQUIRED_ACCURACY: f64 = 0.90;

/// The classifier: widths are in the types, so a mis-wired layer does not compile.
struct Mlp<D: Backend<f32>> {
    hidden: Linear<PIXELS, HIDDEN, D>,
    out: Linear<HIDDEN, CLASSES, D>,
}

impl<D: Backend<f32>> Mlp<D> {
    fn new(rng: &mut Rng) -> Self {
        Mlp {
            hidden: Linear::new(rng),
            out: Linear::new(rng),
        }
    }

    /// Logits for a batch of any size `B` (static for full batches, dynamic for the
    /// last one).
    fn forward<B: Dim>(&self, x: &Tensor<(B, Const<PIXELS>), D>) -> Tensor<(B, Const<CLASSES>), D> {
        self.out.forward(&self.hidden.forward(x).relu())
    }
}

impl<D: Backend<f32>> Module<D, f32> for Mlp<D> {
    fn visit_params(&mut self, f: &mut dyn FnMut(&mut dyn Param<D, f32>)) {
        self.hidden.visit_params(f);
        self.out.visit_params(f);
    }
}

/// One Adam step on a batch; returns the batch loss, still on the device (reading it
/// here would wait for the GPU every step).
fn train_step<B: Dim, D: Backend<f32>>(
    model: &mut Mlp<D>,
    opt: &mut Adam<D>,
    x: &Tensor<(B, Const<PIXELS>), D>,
    y: &Tensor<(B,), D, u32>,
) -> Tensor<(), D> {
    let loss = cross_entropy(&model.forward(x), y);
    let value = loss.detach();
    let grads = loss.backward();
    opt.step(model, &grads);
    value
}

/// Fraction of `data` the model classifies correctly.
fn accuracy<D: Backend<f32>>(model: &Mlp<D>, data: &Dataset) -> f64 {
    let _no_grad = no_grad();
    let x = Tensor::<(usize, Const<PIXELS>), D>::from_vec_shaped(
        data.pixels.clone(),
        (data.len(), Const),
    )
    .expect("the dataset holds len × PIXELS pixels");
    let logits = model.forward(&x).to_vec();
    let correct = logits
        .chunks(CLASSES)
        .zip(&data.labels)
        .filter(|(row, label)| argmax(row) == **label as usize)
        .count();
    correct as f64 / data.len() as f64
}

fn argmax(row: &[f32]) -> usize {
    (0..row.len())
        .max_by(|&a, &b| row[a].total_cmp(&row[b]))
        .expect("a non-empty row")
}

/// Trains on `D` for `epochs` and returns the final test accuracy.
fn run<D: Backend<f32>>(train: &Dataset, test: &Dataset, epochs: usize, rng: &mut Rng) -> f64 {
    let mut model = Mlp::<D>::new(rng);
    let mut opt = Adam::new(LEARNING_RATE);
    let mut order: Vec<usize> = (0..train.len()).collect();
    let mut acc = 0.0;
    for epoch in 1..=epochs {
        rng.shuffle(&mut order);
        let (mut total, mut batches) = (Tensor::<(), D>::zeros(), 0);
        for chunk in order.chunks(BATCH) {
            let batch = train.select(chunk);
            let loss = if chunk.len() == BATCH {
                let x = Tensor::<Rank2<BATCH, PIXELS>, D>::from_vec(batch.pixels)
                    .expect("BATCH × PIXELS pixels");
                let y =
                    Tensor::<Rank1<BATCH>, D, u32>::from_vec(batch.labels).expect("BATCH labels");
                train_step(&mut model, &mut opt, &x, &y)
            } else {
                // The last partial batch: the batch dim is only known at run time.
                let n = chunk.len();
                let x =
                    Tensor::<(usize, Const<PIXELS>), D>::from_vec_shaped(batch.pixels, (n, Const))
                        .expect("n × PIXELS pixels");
                let y = Tensor::<(usize,), D, u32>::from_vec_shaped(batch.labels, (n,))
                    .expect("n labels");
                train_step(&mut model, &mut opt, &x, &y)
            };
            total = total + loss;
            batches += 1;
        }
        acc = accuracy(&model, test);
        println!(
            "epoch {epoch:>2}  loss {:.4}  test accuracy {:.2}%",
            total.item() / batches as f32,
            100.0 * acc
        );
    }
    acc
}

/// Trains on the GPU, or says why there is none.
#[cfg(feature = "gpu")]
fn gpu_run(train: &Dataset, test: &Dataset, rng: &mut Rng) -> Result<f64, String> {
    let info = Gpu::init().map_err(|e| e.to_string())?;
    println!("GPU: {info}");
    Ok(run::<Gpu>(train, test, EPOCHS, rng))
}

#[cfg(not(feature = "gpu"))]
fn gpu_run(_: &Dataset, _: &Dataset, _: &mut Rng) -> Result<f64, String> {
    Err("this build has no GPU backend: build with the `gpu` feature (on by default)".into())
}

fn main() -> ExitCode {
    let device = match parse_device(std::env::args().skip(1)) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("digits: {e}");
            return ExitCode::from(2);
        }
    };
    let path = dataset::default_path();
    let data = match dataset::load(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("digits: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut rng = Rng::seed(0);
    let (train, test) = data.split(0.2, &mut rng);
    println!(
        "digits: {} train / {} test images, MLP {PIXELS}→{HIDDEN}→{CLASSES}, Adam lr {LEARNING_RATE}, batch {BATCH}, {device:?}",
        train.len(),
        test.len()
    );
    let start = Instant::now();
    let acc = match resolve(device) {
        DeviceChoice::Gpu => match gpu_run(&train, &test, &mut rng) {
            Ok(acc) => acc,
            Err(e) => {
                eprintln!("digits: {e}");
                return ExitCode::from(3);
            }
        },
        _ => run::<Cpu>(&train, &test, EPOCHS, &mut rng),
    };
    println!("trained in {:.2} s", start.elapsed().as_secs_f64());
    if acc < REQUIRED_ACCURACY {
        eprintln!(
            "digits: test accuracy {:.2}% is below the required {:.0}%",
            100.0 * acc,
            100.0 * REQUIRED_ACCURACY
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reaches_the_required_accuracy_on_cpu() {
        let data = dataset::load(&dataset::default_path()).expect("the committed dataset loads");
        let mut rng = Rng::seed(0);
        let (train, test) = data.split(0.2, &mut rng);
        assert!(run::<Cpu>(&train, &test, EPOCHS, &mut rng) >= REQUIRED_ACCURACY);
    }

    /// The same model trains on the GPU (lavapipe in CI): fewer epochs keep it quick.
    #[cfg(feature = "gpu")]
    #[test]
    fn trains_on_the_gpu() {
        let data = dataset::load(&dataset::default_path()).expect("the committed dataset loads");
        let mut rng = Rng::seed(0);
        let (train, test) = data.split(0.2, &mut rng);
        assert!(run::<Gpu>(&train, &test, 4, &mut rng) >= REQUIRED_ACCURACY);
    }
}
