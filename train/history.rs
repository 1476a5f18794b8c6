//! The per-epoch metrics of a run, kept as a CSV file beside the checkpoint.
use std::fmt::Write as _;
use std::path::Path;

/// One epoch's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochRecord {
    /// 1-based epoch number.
    pub epoch: usize,
    /// Mean training loss over the epoch's batches.
    pub train_loss: f64,
    /// Mean loss over the test set.
    pub test_loss: f64,
    /// Fraction of the test set classified correctly.
    pub test_accuracy: f64,
    /// Learning rate at the end of the epoch.
    pub lr: f64,
    /// Training steps per second over the epoch.
    pub steps_per_second: f64,
}

/// The CSV header.
const HEADER: &str = "epoch,train_loss,test_loss,test_accuracy,lr,steps_per_second";

/// Writes `records` to `path` as CSV.
pub fn write(path: &Path, records: &[EpochRecord]) -> std::io::Result<()> {
    let mut text = format!("{HEADER}\n");
    for r in records {
        writeln!(
            text,
            "{},{:.6},{:.6},{:.6},{:.6e},{:.1}",
            r.epoch, r.train_loss, r.test_loss, r.test_accuracy, r.lr, r.steps_per_second
        )
        .expect("writing to a String cannot fail");
    }
    std::fs::write(path, text)
}

/// Reads the records a previous run wrote (for `--resume`); the first `epochs`
/// rows are kept.
pub fn read(path: &Path, epochs: usize) -> Result<Vec<EpochRecord>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(format!(
            "{}: not a metrics file of this program",
            path.display()
        ));
    }
    let mut records = Vec::new();
    for (i, line) in lines.enumerate().take(epochs) {
        let bad = || {
            format!(
                "{}: line {}: `{line}` is not a metrics row",
                path.display(),
                i + 2
            )
        };
        let cols: Vec<f64> = line
            .split(',')
            .map(|c| c.parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        let [
            epoch,
            train_loss,
            test_loss,
            test_accuracy,
            lr,
            steps_per_second,
        ] = cols[..]
        else {
            return Err(bad());
        };
        records.push(EpochRecord {
            epoch: epoch as usize,
            train_loss,
            test_loss,
            test_accuracy,
            lr,
            steps_per_second,
        });
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bad_files_are_errors() {
        let dir = std::env::temp_dir().join(format!("volta-train-history-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("metrics.csv");
        let records: Vec<EpochRecord> = (1..=3)
            .map(|e| EpochRecord {
                epoch: e,
                train_loss: 1.0 / e as f64,
                test_loss: 0.5 / e as f64,
                test_accuracy: 0.9,
                lr: 1e-3,
                steps_per_second: 100.0,
            })
            .collect();
        write(&path, &records).unwrap();
        let back = read(&path, 2).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[1].epoch, 2);
        assert!((back[1].train_loss - 0.5).abs() < 1e-6);

        std::fs::write(&path, "epoch,oops\n1,2\n").unwrap();
        assert!(read(&path, 5).unwrap_err().contains("not a metrics file"));
        std::fs::write(&path, format!("{HEADER}\n1,2,x,4,5,6\n")).unwrap();
        assert!(read(&path, 5).unwrap_err().contains("line 2"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
