//! The bundled UCI digits from the bytes of `digits.csv.gz` (the page fetches
//! them; `volta::data::readers::digits::load` reads a path): 64 pixel columns in
//! `0..=16` then the label, one image per line, scaled to `[0, 1]` as Volta's
//! reader scales them.
use flate2::read::MultiGzDecoder;
use std::io::Read;
use volta::data::Labelled;

/// Pixels per image (8×8).
pub const PIXELS: usize = 64;
/// The largest pixel value of the dataset.
pub const MAX_PIXEL: f32 = 16.0;

/// Parses the digits CSV (gzip'd or plain) into a labelled dataset of `[1, 8, 8]`
/// images with pixels in `[0, 1]`.
pub fn parse(bytes: &[u8]) -> Result<Labelled, String> {
    let text = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        MultiGzDecoder::new(bytes)
            .read_to_end(&mut out)
            .map_err(|e| format!("digits: not a valid gzip file: {e}"))?;
        out
    } else {
        bytes.to_vec()
    };
    let text = std::str::from_utf8(&text).map_err(|_| "digits: the file is not text")?;
    let mut features = Vec::new();
    let mut labels = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split(',').map(str::trim).collect();
        if cols.len() != PIXELS + 1 {
            return Err(format!(
                "digits: line {}: {} columns, expected {}",
                i + 1,
                cols.len(),
                PIXELS + 1
            ));
        }
        for (j, c) in cols[..PIXELS].iter().enumerate() {
            let v: f32 = c
                .parse()
                .ok()
                .filter(|v: &f32| v.fract() == 0.0 && (0.0..=MAX_PIXEL).contains(v))
                .ok_or_else(|| {
                    format!(
                        "digits: line {}, column {}: `{c}` is not a pixel (0..=16)",
                        i + 1,
                        j + 1
                    )
                })?;
            features.push(v / MAX_PIXEL);
        }
        let label = cols[PIXELS]
            .parse::<u32>()
            .map_err(|_| format!("digits: line {}: `{}` is not a label", i + 1, cols[PIXELS]))?;
        labels.push(label);
    }
    if labels.is_empty() {
        return Err("digits: the file holds no images".into());
    }
    Labelled::new(features, &[1, 8, 8], labels, 10).map_err(|e| format!("digits: {e}"))
}
