//! A printable summary of a model: one row per layer with its output shape and
//! parameter count, and the totals (what torchinfo and Keras' `summary()` show).
use std::fmt;

/// One layer's row in a [`Summary`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryRow {
    /// The field name (`conv1`), or the function for stateless steps (`relu`).
    pub name: String,
    /// The layer as written in the block (`Conv2d<32, kernel = 3, padding = 1>`).
    pub layer: String,
    /// The output shape, batch first (`[B, 32, 28, 28]`).
    pub output: String,
    /// Scalar parameters of this layer.
    pub params: usize,
}

/// The layer table of a model; `Display` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The model's name.
    pub model: String,
    /// Its input shape, batch first.
    pub input: String,
    /// One row per layer, in order.
    pub rows: Vec<SummaryRow>,
}

impl Summary {
    /// Scalar parameters of the whole model.
    pub fn total_params(&self) -> usize {
        self.rows.iter().map(|r| r.params).sum()
    }
}

/// `[B, 32, 28, 28]`: a per-sample shape `S` after a batch dim called `batch`.
#[doc(hidden)]
pub fn sample_shape<S: crate::shape::Shape>(batch: &str) -> String {
    let mut parts = vec![batch.to_string()];
    parts.extend(
        S::STATIC_DIMS
            .iter()
            .map(|d| d.map_or("?".to_string(), |n| n.to_string())),
    );
    format!("[{}]", parts.join(", "))
}

/// `1234567` → `1,234,567`.
fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head = ["Layer", "Type", "Output shape", "Params"];
        let cells: Vec<[String; 4]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    r.name.clone(),
                    r.layer.clone(),
                    r.output.clone(),
                    grouped(r.params),
                ]
            })
            .collect();
        let mut width = head.map(|h| h.chars().count());
        for row in &cells {
            for (w, c) in width.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let total: usize = width.iter().sum::<usize>() + 6;
        let line =
            |f: &mut fmt::Formatter<'_>, c: char| writeln!(f, "{}", c.to_string().repeat(total));
        writeln!(f, "{} (input {})", self.model, self.input)?;
        line(f, '=')?;
        let row = |f: &mut fmt::Formatter<'_>, r: [&str; 4]| {
            writeln!(
                f,
                "{:<w0$}  {:<w1$}  {:<w2$}  {:>w3$}",
                r[0],
                r[1],
                r[2],
                r[3],
                w0 = width[0],
                w1 = width[1],
                w2 = width[2],
                w3 = width[3]
            )
        };
        row(f, head)?;
        line(f, '-')?;
        for c in &cells {
            row(f, [&c[0], &c[1], &c[2], &c[3]])?;
        }
        line(f, '=')?;
        write!(f, "Total params: {}", grouped(self.total_params()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_an_aligned_table_with_totals() {
        let s = Summary {
            model: "Mlp".into(),
            input: "[B, 4]".into(),
            rows: vec![
                SummaryRow {
                    name: "fc1".into(),
                    layer: "Linear<1000>".into(),
                    output: "[B, 1000]".into(),
                    params: 5000,
                },
                SummaryRow {
                    name: "relu".into(),
                    layer: "relu".into(),
                    output: "[B, 1000]".into(),
                    params: 0,
                },
            ],
        };
        let text = s.to_string();
        assert!(
            text.contains("fc1    Linear<1000>  [B, 1000]      5,000"),
            "{text}"
        );
        assert!(text.ends_with("Total params: 5,000"), "{text}");
        assert_eq!(grouped(1234567), "1,234,567");
    }
}
