//! The PNG of a run's curves: losses on the left, test accuracy on the right.
use crate::history::EpochRecord;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use std::path::Path;

/// DejaVu Sans (Bitstream Vera license, `train/assets/`): bundled so the PNG needs
/// no system font libraries.
const FONT: &[u8] = include_bytes!("assets/DejaVuSans.ttf");

/// A curve: its legend label, colour and value per epoch.
type Curve<'a> = (&'a str, RGBColor, fn(&EpochRecord) -> f64);

/// Draws `records` into a 1100×440 PNG at `path`, the training loss labelled
/// as the main job computes it (with label smoothing).
pub fn draw(path: &Path, records: &[EpochRecord]) -> Result<(), String> {
    draw_labelled(path, records, "train (label-smoothed)")
}

/// [`draw`] with the training loss's legend `train_label`.
pub fn draw_labelled(
    path: &Path,
    records: &[EpochRecord],
    train_label: &str,
) -> Result<(), String> {
    register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| "the bundled font does not parse".to_string())?;
    let root = BitMapBackend::new(path, (1100, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (left, right) = root.split_horizontally(550);
    let last = records.last().map_or(1, |r| r.epoch).max(2) as f64;
    let first = records.first().map_or(1, |r| r.epoch) as f64;
    // One tick per epoch for short runs (no repeated labels), at most 11.
    let ticks = ((last - first) as usize + 1).min(11);

    let top = records
        .iter()
        .flat_map(|r| [r.train_loss, r.test_loss])
        .fold(0.0f64, f64::max)
        * 1.1;
    let mut losses = ChartBuilder::on(&left)
        .caption("loss", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(52)
        .build_cartesian_2d(first..last, 0.0..top.max(1e-3))
        .map_err(err)?;
    losses
        .configure_mesh()
        .x_desc("epoch")
        .x_labels(ticks)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    let series = |f: fn(&EpochRecord) -> f64| {
        records
            .iter()
            .map(move |r| (r.epoch as f64, f(r)))
            .collect::<Vec<_>>()
    };
    let curves: [Curve<'_>; 2] = [
        (train_label, RGBColor(31, 119, 180), |r| r.train_loss),
        ("test", RGBColor(255, 127, 14), |r| r.test_loss),
    ];
    for (label, color, value) in curves {
        losses
            .draw_series(LineSeries::new(series(value), color.stroke_width(2)))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    losses
        .configure_series_labels()
        .label_font(("sans-serif", 14))
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(err)?;

    let low = records
        .iter()
        .map(|r| 100.0 * r.test_accuracy)
        .fold(100.0f64, f64::min);
    let mut accuracy = ChartBuilder::on(&right)
        .caption("test accuracy (%)", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(52)
        .build_cartesian_2d(first..last, (low - 2.0).max(0.0)..100.0)
        .map_err(err)?;
    accuracy
        .configure_mesh()
        .x_desc("epoch")
        .x_labels(ticks)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    accuracy
        .draw_series(LineSeries::new(
            series(|r| 100.0 * r.test_accuracy),
            RGBColor(44, 160, 44).stroke_width(2),
        ))
        .map_err(err)?;
    root.present().map_err(err)
}

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("drawing the plot: {e}")
}
