//! Picking the next token from a language model's logits: greedy, or sampled at a
//! temperature within the top `k` tokens and the top-`p` probability mass.
//!
//! ```
//! use volta::models::{Sampler, SamplerConfig};
//!
//! let logits = [0.1, 3.0, 2.9, -1.0];
//! assert_eq!(Sampler::greedy().sample(&logits), 1);
//!
//! // Seeded: the same seed draws the same tokens.
//! let config = SamplerConfig { temperature: 0.7, top_k: 2, top_p: 0.9, seed: 1 };
//! let mut sampler = Sampler::new(config)?;
//! let token = sampler.sample(&logits);
//! assert!(token == 1 || token == 2);
//! assert_eq!(Sampler::new(config)?.sample(&logits), token);
//! # Ok::<(), volta::models::SamplerError>(())
//! ```
use crate::Rng;
use std::fmt;

/// How a [`Sampler`] picks: [`Default`] is greedy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplerConfig {
    /// Softmax temperature; 0 is greedy (always the likeliest token). Finite, ≥ 0.
    pub temperature: f64,
    /// Sample among the `top_k` likeliest tokens only; 0 keeps them all.
    pub top_k: usize,
    /// Then among the smallest set of likeliest tokens whose probability reaches
    /// `top_p` (nucleus sampling); in (0, 1], 1 keeps them all.
    pub top_p: f64,
    /// Seed of the random draws (one per sampled token; greedy draws none).
    pub seed: u64,
}

impl Default for SamplerConfig {
    /// Greedy: temperature 0, no top-k or top-p cut, seed 0.
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
        }
    }
}

/// A [`SamplerConfig`] value out of range.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum SamplerError {
    /// The temperature is negative or not finite.
    Temperature(f64),
    /// `top_p` is outside (0, 1].
    TopP(f64),
}

impl fmt::Display for SamplerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Temperature(t) => write!(
                f,
                "temperature must be finite and at least 0 (0 is greedy), not {t}"
            ),
            Self::TopP(p) => write!(f, "top_p must be in (0, 1], not {p}"),
        }
    }
}

impl std::error::Error for SamplerError {}

/// Picks next tokens from logits by a [`SamplerConfig`], with its own seeded
/// generator: the same config and logits give the same tokens.
#[derive(Clone, Debug)]
pub struct Sampler {
    config: SamplerConfig,
    rng: Rng,
}

impl Sampler {
    /// A sampler for `config`, or the error naming the value out of range.
    pub fn new(config: SamplerConfig) -> Result<Self, SamplerError> {
        if !(config.temperature.is_finite() && config.temperature >= 0.0) {
            return Err(SamplerError::Temperature(config.temperature));
        }
        if !(config.top_p > 0.0 && config.top_p <= 1.0) {
            return Err(SamplerError::TopP(config.top_p));
        }
        Ok(Sampler {
            config,
            rng: Rng::seed(config.seed),
        })
    }

    /// Always the likeliest token.
    pub fn greedy() -> Self {
        let config = SamplerConfig::default();
        Sampler {
            config,
            rng: Rng::seed(config.seed),
        }
    }

    /// The settings.
    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// The next token: the likeliest at temperature 0 (the last of equal ones), else
    /// drawn from the softmax of `logits / temperature` cut to the `top_k`
    /// likeliest, then to the top-`p` mass.
    ///
    /// # Panics
    /// When `logits` is empty.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let argmax = (0..logits.len())
            .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
            .expect("Sampler::sample: no logits");
        let SamplerConfig {
            temperature,
            top_k,
            top_p,
            ..
        } = self.config;
        if temperature == 0.0 {
            return argmax as u32;
        }
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_unstable_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        if top_k > 0 {
            order.truncate(top_k);
        }
        // Weights relative to the largest logit: exp cannot overflow.
        let top = f64::from(logits[argmax]);
        let weights: Vec<f64> = order
            .iter()
            .map(|&i| ((f64::from(logits[i]) - top) / temperature).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        let (mut kept, mut mass) = (0, 0.0);
        while kept < order.len() && mass < top_p * total {
            mass += weights[kept];
            kept += 1;
        }
        if kept == 0 {
            // Only NaN logits get here (the largest weight is 1 otherwise).
            return argmax as u32;
        }
        let mut r = self.rng.uniform() * mass;
        for (i, w) in weights[..kept].iter().enumerate() {
            if r < *w {
                return order[i] as u32;
            }
            r -= w;
        }
        order[kept - 1] as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampler(temperature: f64, top_k: usize, top_p: f64) -> Sampler {
        Sampler::new(SamplerConfig {
            temperature,
            top_k,
            top_p,
            seed: 3,
        })
        .unwrap()
    }

    #[test]
    fn sampling_respects_greedy_top_k_and_top_p() {
        let logits = [0.1, 3.0, 2.9, -1.0];
        assert_eq!(Sampler::greedy().sample(&logits), 1);
        assert_eq!(sampler(0.0, 0, 1.0).sample(&logits), 1);
        let (mut k1, mut p, mut k2) = (
            sampler(1.0, 1, 1.0),
            sampler(1.0, 0, 0.01),
            sampler(1.0, 2, 1.0),
        );
        for _ in 0..50 {
            assert_eq!(k1.sample(&logits), 1);
            assert_eq!(p.sample(&logits), 1);
            assert!([1, 2].contains(&k2.sample(&logits)));
        }
        // At a high temperature every token is drawn sometimes.
        let mut hot = sampler(50.0, 0, 1.0);
        let mut seen = [false; 4];
        for _ in 0..400 {
            seen[hot.sample(&logits) as usize] = true;
        }
        assert_eq!(seen, [true; 4]);
    }

    #[test]
    fn a_seed_repeats_its_draws_and_bad_values_are_errors() {
        let logits: Vec<f32> = (0..100).map(|i| (i % 7) as f32 * 0.3).collect();
        let draws = |seed| {
            let config = SamplerConfig {
                temperature: 1.0,
                seed,
                ..Default::default()
            };
            let mut s = Sampler::new(config).unwrap();
            (0..20).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        assert_eq!(draws(5), draws(5));
        assert_ne!(draws(5), draws(6));
        let bad = |temperature, top_p| {
            Sampler::new(SamplerConfig {
                temperature,
                top_p,
                ..Default::default()
            })
            .unwrap_err()
        };
        assert_eq!(bad(-0.5, 1.0), SamplerError::Temperature(-0.5));
        assert!(matches!(bad(f64::NAN, 1.0), SamplerError::Temperature(_)));
        assert_eq!(bad(1.0, 0.0), SamplerError::TopP(0.0));
        assert_eq!(bad(1.0, 1.5), SamplerError::TopP(1.5));
        assert_eq!(
            bad(1.0, 1.5).to_string(),
            "top_p must be in (0, 1], not 1.5"
        );
    }
}
