//! The digits CNN, shared by the main job (`train/run.rs`) and the browser demo
//! (`web/src/lib.rs` includes this very file), so the page runs the same source.
use volta::prelude::*;

model! {
    /// The digits classifier: two convolution blocks over the 1×8×8 images, then a
    /// linear layer over the 64×2×2 features.
    pub struct DigitsCnn for (B, 1, 8, 8) -> (B, 10) {
        conv1: Conv2d<32, kernel = 3, padding = 1>,
        bn1: BatchNorm2d,
        relu,
        pool1: MaxPool2d<2>,
        conv2: Conv2d<64, kernel = 3, padding = 1>,
        bn2: BatchNorm2d,
        relu,
        pool2: MaxPool2d<2>,
        flatten,
        drop: Dropout<0.25>,
        fc: Linear<10>,
    }
}
