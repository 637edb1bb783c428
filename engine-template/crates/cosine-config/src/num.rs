//! TOML writes `10` and `10.0` differently; the solver may emit either for a float knob.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};

/// An integer or a float (an untagged enum's error, "data did not match any variant", named
/// neither the field's type nor what was there).
struct Num(f64);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        struct NumVisitor;
        impl Visitor<'_> for NumVisitor {
            type Value = Num;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num(v))
            }
        }
        d.deserialize_any(NumVisitor)
    }
}

impl From<Num> for f64 {
    fn from(n: Num) -> f64 {
        n.0
    }
}

/// Accepts an integer or a float.
pub fn f64_any<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Num::deserialize(d)?.into())
}

/// Accepts a list of integers/floats, or a single number (applied to every level).
pub fn f64_vec<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    struct VecVisitor;
    impl<'de> Visitor<'de> for VecVisitor {
        type Value = Vec<f64>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a number or a list of numbers")
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Vec<f64>, E> {
            Ok(vec![v as f64])
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Vec<f64>, E> {
            Ok(vec![v as f64])
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Vec<f64>, E> {
            Ok(vec![v])
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<f64>, A::Error> {
            let mut out = Vec::new();
            while let Some(n) = seq.next_element::<Num>()? {
                out.push(n.into());
            }
            Ok(out)
        }
    }
    d.deserialize_any(VecVisitor)
}
