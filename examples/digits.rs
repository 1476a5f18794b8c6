//! Trains a classifier defined with `model!` on the UCI optical digits with Adam and
//! mini-batches — an MLP (64 → 128 → 10), a small CNN or a small vision transformer
//! on the 1×8×8 images — and fails unless the test accuracy reaches 90%.
//!
//! ```text
//! cargo run --release --example digits [-- --device auto|cpu|gpu] [--model mlp|cnn|vit] [--data PATH]
//! ```
use clap::Parser;
use std::process::ExitCode;
use std::time::Instant;
use volta::data::readers::digits::{self, CLASSES, PIXELS};
use volta::data::{DataLoader, Labelled};
use volta::nn::loss::cross_entropy;
use volta::prelude::*;
use volta_examples::cli::{DataArg, DeviceArg, DeviceChoice, resolve};

const HIDDEN: usize = 128;
/// `model!` takes literal widths; this one is checked against `HIDDEN` below.
const _: () = assert!(HIDDEN == 128);
const BATCH: usize = 32;
const EPOCHS: usize = 20;
const LEARNING_RATE: f64 = 3e-3;
const REQUIRED_ACCURACY: f64 = 0.90;

/// Trains a classifier on the UCI optical digits (an MLP, a small CNN or a small vision
/// transformer on the 1×8×8 images) with Adam and mini-batches; fails unless the test
/// accuracy reaches 90%.
#[derive(Debug, Parser)]
#[command(name = "digits", args_override_self = true)]
struct Args {
    /// The classifier: the MLP (64 → 128 → 10), the small CNN or the vision transformer.
    #[arg(long, value_enum, default_value_t = ModelChoice::Mlp)]
    model: ModelChoice,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    data: DataArg,
}

/// The `--model` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ModelChoice {
    /// 64 → 128 → 10, ReLU.
    Mlp,
    /// Two 3×3 convolutions with max pooling, then a linear classifier.
    Cnn,
    /// 2×2 patches as 16 tokens, two transformer blocks, the mean over the tokens.
    Vit,
}

model! {
    /// The MLP: widths are in the types, so a mis-wired layer does not compile.
    pub struct Mlp for (B, 64) -> (B, 10) {
        hidden: Linear<128>,
        relu,
        out: Linear<10>,
    }
}

model! {
    /// A small CNN over the 8×8 images: 8×8 → 4×4 → 2×2, then a linear classifier.
    pub struct Cnn for (B, 1, 8, 8) -> (B, 10) {
        conv1: Conv2d<16, kernel = 3, padding = 1>,
        relu,
        pool1: MaxPool2d<2>,
        conv2: Conv2d<32, kernel = 3, padding = 1>,
        relu,
        pool2: MaxPool2d<2>,
        flatten,
        fc: Linear<10>,
    }
}

model! {
    /// A small vision transformer: the 2×2 patches of an 8×8 image as 16 tokens of
    /// width 32 with learned positions, two blocks attending both ways, then the
    /// mean over the tokens into a linear classifier.
    pub struct Vit for (B, 1, 8, 8) -> (B, 10) {
        patches: Conv2d<32, kernel = 2, stride = 2>,
        to_sequence,
        pos: PositionalEmbedding<16>,
        blocks: [TransformerBlock<4, causal = false>; 2],
        norm: LayerNorm,
        mean_pool,
        head: Linear<10>,
    }
}

/// A digits classifier: logits for a batch of flat images of any size `B` (static
/// for the training batches, dynamic for the whole test set).
trait Classifier<D: Backend<f32>>: Module<D, f32> + Model {
    fn logits<B: Dim>(&self, x: &Tensor<(B, Const<PIXELS>), D>) -> Tensor<(B, Const<CLASSES>), D>;
}

impl<D: Backend<f32>> Classifier<D> for Mlp<D> {
    fn logits<B: Dim>(&self, x: &Tensor<(B, Const<PIXELS>), D>) -> Tensor<(B, Const<CLASSES>), D> {
        self.forward(x)
    }
}

impl<D: Backend<f32>> Classifier<D> for Cnn<D> {
    fn logits<B: Dim>(&self, x: &Tensor<(B, Const<PIXELS>), D>) -> Tensor<(B, Const<CLASSES>), D> {
        self.forward(&images(x))
    }
}

impl<D: Backend<f32>> Classifier<D> for Vit<D> {
    fn logits<B: Dim>(&self, x: &Tensor<(B, Const<PIXELS>), D>) -> Tensor<(B, Const<CLASSES>), D> {
        self.forward(&images(x))
    }
}

/// Flat rows of 64 pixels as 1×8×8 images.
fn images<B: Dim, D: Backend<f32>>(
    x: &Tensor<(B, Const<PIXELS>), D>,
) -> Tensor<(B, Const<1>, Const<8>, Const<8>), D> {
    x.reshape_to((x.shape().0, Const, Const, Const))
        .expect("64 pixels are 1×8×8")
}

/// One Adam step on a batch; returns the batch loss, still on the device (reading it
/// here would wait for the GPU every step).
fn train_step<B: Dim, D: Backend<f32>, M: Classifier<D>>(
    model: &mut M,
    opt: &mut Adam<D>,
    x: &Tensor<(B, Const<PIXELS>), D>,
    y: &Tensor<(B,), D, u32>,
) -> Tensor<(), D> {
    let loss = cross_entropy(&model.logits(x), y);
    let value = loss.detach();
    let grads = loss.backward();
    opt.step(model, &grads);
    value
}

/// Fraction of `data` the model classifies correctly.
fn accuracy<D: Backend<f32>, M: Classifier<D>>(model: &mut M, data: &Labelled) -> f64 {
    model.eval();
    let _no_grad = no_grad();
    let x = Tensor::<(usize, Const<PIXELS>), D>::from_vec_shaped(
        data.features().to_vec(),
        (data.len(), Const),
    )
    .expect("the dataset holds len × PIXELS pixels");
    let logits = model.logits(&x).to_vec();
    model.train();
    let correct = logits
        .chunks(CLASSES)
        .zip(data.labels())
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
///
/// A [`DataLoader`] cuts each epoch into shuffled batches of exactly `BATCH` images
/// (the last partial batch is dropped, so the batch dim is `Const<BATCH>`), and
/// prepares the next batches on a background thread — uploaded to `D` — while
/// the current step runs.
fn run<D: Backend<f32>, M: Classifier<D>>(
    train: &Labelled,
    test: &Labelled,
    epochs: usize,
    rng: &mut Rng,
) -> f64 {
    let mut model = M::new(rng);
    let mut opt = Adam::new(LEARNING_RATE);
    let loader = DataLoader::new(train.clone())
        .features::<Rank1<PIXELS>>()
        .expect("digits samples are 64 pixels")
        .batch::<BATCH>()
        .drop_last()
        .shuffle(rng.next_u64())
        .device::<D>();
    let mut acc = 0.0;
    for epoch in 1..=epochs {
        let mut total = Tensor::<(), D>::zeros();
        for batch in loader.epoch(epoch as u64) {
            let x: Tensor<Rank2<BATCH, PIXELS>, D> = batch.inputs;
            total = total + train_step(&mut model, &mut opt, &x, &batch.targets);
        }
        acc = accuracy(&mut model, test);
        println!(
            "epoch {epoch:>2}  loss {:.4}  test accuracy {:.2}%",
            total.item() / loader.len() as f32,
            100.0 * acc
        );
    }
    acc
}

/// Trains on the GPU, or says why there is none.
#[cfg(feature = "gpu")]
fn gpu_run(
    train: &Labelled,
    test: &Labelled,
    model: ModelChoice,
    rng: &mut Rng,
) -> Result<f64, String> {
    let info = Gpu::init().map_err(|e| e.to_string())?;
    println!("GPU: {info}");
    Ok(match model {
        ModelChoice::Mlp => run::<Gpu, Mlp<Gpu>>(train, test, EPOCHS, rng),
        ModelChoice::Cnn => run::<Gpu, Cnn<Gpu>>(train, test, EPOCHS, rng),
        ModelChoice::Vit => run::<Gpu, Vit<Gpu>>(train, test, EPOCHS, rng),
    })
}

#[cfg(not(feature = "gpu"))]
fn gpu_run(_: &Labelled, _: &Labelled, _: ModelChoice, _: &mut Rng) -> Result<f64, String> {
    Err("this build has no GPU backend: build with the `gpu` feature (on by default)".into())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let device = args.device.device;
    let data = match args.data.path() {
        Ok(path) => digits::load(path).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let data = match data {
        Ok(d) => d,
        Err(e) => {
            eprintln!("digits: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut rng = Rng::seed(0);
    let (train, test) = data.split(0.2, &mut rng);
    println!(
        "digits: {} train / {} test images, Adam lr {LEARNING_RATE}, batch {BATCH}, {device:?}",
        train.len(),
        test.len()
    );
    let summary = match args.model {
        ModelChoice::Mlp => Mlp::<Cpu>::new(&mut Rng::seed(0)).summary(),
        ModelChoice::Cnn => Cnn::<Cpu>::new(&mut Rng::seed(0)).summary(),
        ModelChoice::Vit => Vit::<Cpu>::new(&mut Rng::seed(0)).summary(),
    };
    println!("{summary}");
    let start = Instant::now();
    let acc = match resolve(device) {
        DeviceChoice::Gpu => match gpu_run(&train, &test, args.model, &mut rng) {
            Ok(acc) => acc,
            Err(e) => {
                eprintln!("digits: {e}");
                return ExitCode::from(3);
            }
        },
        _ => match args.model {
            ModelChoice::Mlp => run::<Cpu, Mlp>(&train, &test, EPOCHS, &mut rng),
            ModelChoice::Cnn => run::<Cpu, Cnn>(&train, &test, EPOCHS, &mut rng),
            ModelChoice::Vit => run::<Cpu, Vit>(&train, &test, EPOCHS, &mut rng),
        },
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
    use volta_examples::find_digits;

    #[test]
    fn the_command_line_parses_and_documents_every_option() {
        volta_examples::cli::assert_documented::<Args>();
        let parse = |argv: &[&str]| Args::try_parse_from(argv.iter().copied());
        let a = parse(&["digits"]).unwrap();
        assert_eq!(
            (a.model, a.device.device, a.data.data),
            (ModelChoice::Mlp, DeviceChoice::Auto, None)
        );
        let a = parse(&[
            "digits", "--model", "cnn", "--device", "cpu", "--data", "d.csv",
        ])
        .unwrap();
        assert_eq!(
            (a.model, a.device.device, a.data.data),
            (ModelChoice::Cnn, DeviceChoice::Cpu, Some("d.csv".into()))
        );
        assert_eq!(
            parse(&["digits", "--model", "vit"]).unwrap().model,
            ModelChoice::Vit
        );
        let help = parse(&["digits", "--help"]).unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
        assert!(help.to_string().contains("--model"));
        assert!(parse(&["digits", "--model", "rnn"]).is_err());
        assert!(parse(&["digits", "--model"]).is_err());
        assert!(parse(&["digits", "extra"]).is_err());
    }

    #[test]
    fn reaches_the_required_accuracy_on_cpu() {
        let data = digits::load(find_digits().expect("the committed dataset")).expect("it loads");
        let mut rng = Rng::seed(0);
        let (train, test) = data.split(0.2, &mut rng);
        assert!(run::<Cpu, Mlp>(&train, &test, EPOCHS, &mut rng) >= REQUIRED_ACCURACY);
    }

    /// The CNN learns too (a few epochs).
    #[test]
    fn cnn_reaches_the_required_accuracy_on_cpu() {
        let data = digits::load(find_digits().expect("the committed dataset")).expect("it loads");
        let mut rng = Rng::seed(0);
        let (train, test) = data.split(0.2, &mut rng);
        assert!(run::<Cpu, Cnn>(&train, &test, 4, &mut rng) >= REQUIRED_ACCURACY);
    }

    /// The vision transformer learns too (a few epochs).
    #[test]
    fn vit_reaches_the_required_accuracy_on_cpu() {
        let data = digits::load(find_digits().expect("the committed dataset")).expect("it loads");
        let mut rng = Rng::seed(0);
        let (train, test) = data.split(0.2, &mut rng);
        assert!(run::<Cpu, Vit>(&train, &test, 12, &mut rng) >= REQUIRED_ACCURACY);
    }

    /// The same model trains on the GPU (lavapipe in CI): fewer epochs keep it quick.
    #[cfg(feature = "gpu")]
    #[test]
    fn trains_on_the_gpu() {
        let data = digits::load(find_digits().expect("the committed dataset")).expect("it loads");
        let mut rng = Rng::seed(0);
        let (train, test) = data.split(0.2, &mut rng);
        assert!(run::<Gpu, Mlp<Gpu>>(&train, &test, 4, &mut rng) >= REQUIRED_ACCURACY);
    }
}
