// A `Llama` alias whose dims do not fit: 577 features cannot split into 9 heads. Loading
// it fails `cargo build` via the const assert behind `Llama::HEAD_DIM`.
use volta::Cpu;
use volta::io::gguf::Gguf;
use volta::models::llama::Llama;

type Broken<D> = Llama<D, 30, 577, 1536, 9, 3, 49152>;

fn main() {
    let gguf = Gguf::open("SmolLM2-135M-Instruct.Q4_1.gguf").unwrap();
    let _model = Broken::<Cpu>::from_gguf(&gguf);
}
