//! A built-in layer's arguments (`Conv2d<8, kernel = 3>`): positional and named,
//! checked against the options the layer has, each given once.
use super::parse::{Arg, LayerSpec, Value};
use syn::Ident;

/// A built-in layer's arguments, checked against what it accepts.
pub struct Args<'a> {
    /// The layer, where errors point.
    spec: &'a LayerSpec,
    /// The unnamed arguments, in order.
    pub positional: Vec<&'a Arg>,
    /// The options given, by name; an unnamed argument whose slot is an option
    /// (`MaxPool2d<2>`: `kernel`) counts as that option.
    options: Vec<(String, &'a Arg)>,
}

impl<'a> Args<'a> {
    /// `names`: the options; `slots`: what the unnamed arguments are, in order.
    /// An option may be given once, as PyTorch has it ("got multiple values").
    pub fn take(spec: &'a LayerSpec, names: &[&str], slots: &[&str]) -> syn::Result<Self> {
        let (named, positional): (Vec<&Arg>, Vec<&Arg>) =
            spec.args.iter().partition(|a| a.name.is_some());
        if let Some(extra) = positional.get(slots.len()) {
            return Err(syn::Error::new(
                extra.span,
                format!(
                    "{} takes {} unnamed argument(s); name the others ({})",
                    spec.kind,
                    slots.len(),
                    names.join(", ")
                ),
            ));
        }
        let mut options: Vec<(String, &Arg)> = slots
            .iter()
            .zip(&positional)
            .filter(|(s, _)| names.contains(s))
            .map(|(s, a)| (s.to_string(), *a))
            .collect();
        for a in named {
            let n = a.name.as_ref().unwrap();
            if !names.contains(&n.to_string().as_str()) {
                let options = if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                };
                return Err(syn::Error::new_spanned(
                    n,
                    format!("{} has no option `{n}`; its options: {options}", spec.kind),
                ));
            }
            if let Some((_, first)) = options.iter().find(|(o, _)| n == o) {
                let how = if first.name.is_none() {
                    " by position"
                } else {
                    ""
                };
                return Err(syn::Error::new_spanned(
                    n,
                    format!(
                        "`{n}` is given twice ({}{how}, then {}); give it once",
                        first.value, a.value
                    ),
                ));
            }
            options.push((n.to_string(), a));
        }
        Ok(Args {
            spec,
            positional,
            options,
        })
    }

    pub fn get(&self, name: &str) -> Option<&'a Arg> {
        self.options
            .iter()
            .find(|(o, _)| o == name)
            .map(|(_, a)| *a)
    }

    pub fn pair(&self, name: &str, default: Option<usize>) -> syn::Result<[usize; 2]> {
        match (self.get(name), default) {
            (Some(a), _) => a.pair(),
            (None, Some(d)) => Ok([d, d]),
            (None, None) => Err(syn::Error::new_spanned(
                &self.spec.tokens,
                format!("{} needs `{name} = …`", self.spec.kind),
            )),
        }
    }

    pub fn int(&self, name: &str, default: usize) -> syn::Result<usize> {
        self.get(name).map_or(Ok(default), |a| a.int())
    }

    pub fn float(&self, name: &str, default: f64) -> syn::Result<f64> {
        self.get(name).map_or(Ok(default), |a| a.float())
    }

    pub fn bool(&self, name: &str, default: bool) -> syn::Result<bool> {
        match self.get(name) {
            None => Ok(default),
            Some(Arg {
                value: Value::Bool(b),
                ..
            }) => Ok(*b),
            Some(a) => Err(syn::Error::new(
                a.span,
                format!("`{name}` is `true` or `false`"),
            )),
        }
    }
}

impl Arg {
    pub fn int(&self) -> syn::Result<usize> {
        match self.value {
            Value::Int(n) => Ok(n),
            _ => Err(syn::Error::new(self.span, "expected an integer")),
        }
    }
    pub fn pair(&self) -> syn::Result<[usize; 2]> {
        match self.value {
            Value::Int(n) => Ok([n, n]),
            Value::Pair(a, b) => Ok([a, b]),
            _ => Err(syn::Error::new(
                self.span,
                "expected an integer or a pair `(h, w)`",
            )),
        }
    }
    pub fn name(&self) -> syn::Result<&Ident> {
        match &self.value {
            Value::Name(n) => Ok(n),
            _ => Err(syn::Error::new(self.span, "expected a field's name")),
        }
    }
    pub fn float(&self) -> syn::Result<f64> {
        match self.value {
            Value::Float(f) => Ok(f),
            Value::Int(n) => Ok(n as f64),
            _ => Err(syn::Error::new(self.span, "expected a number")),
        }
    }
}
