//! TOML writes `10` and `10.0` differently; the solver may emit either for a float knob.

use serde::{Deserialize, Deserializer};

#[derive(Deserialize)]
#[serde(untagged)]
enum Num {
    I(i64),
    F(f64),
}

impl From<Num> for f64 {
    fn from(n: Num) -> f64 {
        match n {
            Num::I(i) => i as f64,
            Num::F(f) => f,
        }
    }
}

/// Accepts an integer or a float.
pub fn f64_any<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Num::deserialize(d)?.into())
}

/// Accepts a list of integers/floats, or a single number (applied to every level).
pub fn f64_vec<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(Num),
        Many(Vec<Num>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(n) => vec![n.into()],
        OneOrMany::Many(v) => v.into_iter().map(f64::from).collect(),
    })
}
