//! The bundled UCI digits' dims, for the page's drawings: the page fetches
//! `digits.csv.gz` and reads it with `volta::data::readers::digits::load_bytes`.

/// Pixels per image (8×8).
pub const PIXELS: usize = volta::data::readers::digits::PIXELS;
/// The largest pixel value of the dataset.
pub const MAX_PIXEL: f32 = volta::data::readers::digits::MAX_PIXEL as f32;

/// Parses the digits CSV (gzip'd or plain) into a labelled dataset of `[1, 8, 8]`
/// images with pixels in `[0, 1]`, as the main job reads it.
pub fn parse(bytes: &[u8]) -> Result<volta::data::Labelled, volta::data::DataError> {
    volta::data::readers::digits::load_bytes("digits.csv.gz", bytes)
}
