//! Integer fields of request bodies read as JSON reads them: `300` and `300.0` are the same
//! number (RFC 8259, JSON Schema's `integer`), so both are taken; `300.5` and out-of-range
//! values are refused naming the accepted range. Used through `#[serde(deserialize_with)]`.

use serde::Deserialize;
use serde::de::{self, Deserializer, Unexpected, Visitor};
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

/// An integer type a body field may have, with its range for error messages.
pub trait BodyInteger: Copy + TryFrom<i128> {
    const MIN: i128;
    const MAX: i128;
}

macro_rules! body_integer {
    ($($type:ty),+) => {
        $(impl BodyInteger for $type {
            const MIN: i128 = <$type>::MIN as i128;
            const MAX: i128 = <$type>::MAX as i128;
        })+
    };
}
body_integer!(u8, u16, u32, u64, i32, i64, usize);

/// A whole number read from a JSON integer or from a float without a fraction.
pub struct WholeNumber<T>(pub T);

struct WholeNumberVisitor<T>(PhantomData<T>);

impl<T: BodyInteger> WholeNumberVisitor<T> {
    fn in_range<E: de::Error>(value: i128, unexpected: Unexpected<'_>) -> Result<T, E> {
        if !(T::MIN..=T::MAX).contains(&value) {
            return Err(E::invalid_value(unexpected, &Self(PhantomData)));
        }
        T::try_from(value).map_err(|_| E::invalid_value(unexpected, &Self(PhantomData)))
    }
}

impl<T: BodyInteger> Visitor<'_> for WholeNumberVisitor<T> {
    type Value = T;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "an integer from {} to {}", T::MIN, T::MAX)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<T, E> {
        Self::in_range(i128::from(value), Unexpected::Signed(value))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<T, E> {
        Self::in_range(i128::from(value), Unexpected::Unsigned(value))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<T, E> {
        // Beyond ±2^63 a float no longer says which integer it means.
        const LIMIT: f64 = 9_223_372_036_854_775_808.0;
        if !value.is_finite() || value.abs() >= LIMIT {
            return Err(E::invalid_type(Unexpected::Float(value), &self));
        }
        // A decimal such as `2251799813685247.0` reaches us rounded to a double, and the
        // parser may land one unit in the last place off the integer it spelled: within one
        // such unit, it is that integer. (Below 2^50 a unit is under 1/8, so `300.5` stays
        // a fraction and is refused.)
        let nearest = value.round();
        let unit_in_the_last_place = f64::from_bits(value.abs().to_bits() + 1) - value.abs();
        if (value - nearest).abs() > unit_in_the_last_place {
            return Err(E::invalid_type(Unexpected::Float(value), &self));
        }
        Self::in_range(nearest as i128, Unexpected::Float(value))
    }
}

impl<'de, T: BodyInteger> Deserialize<'de> for WholeNumber<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(WholeNumberVisitor(PhantomData))
            .map(WholeNumber)
    }
}

/// For a field `T`.
pub fn whole<'de, D: Deserializer<'de>, T: BodyInteger>(deserializer: D) -> Result<T, D::Error> {
    WholeNumber::deserialize(deserializer).map(|number| number.0)
}

/// For a field `Option<T>` (with `#[serde(default)]`).
pub fn optional_whole<'de, D: Deserializer<'de>, T: BodyInteger>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    Option::<WholeNumber<T>>::deserialize(deserializer).map(|number| number.map(|number| number.0))
}

/// For a field `Option<Vec<T>>` (with `#[serde(default)]`).
pub fn optional_whole_list<'de, D: Deserializer<'de>, T: BodyInteger>(
    deserializer: D,
) -> Result<Option<Vec<T>>, D::Error> {
    Option::<Vec<WholeNumber<T>>>::deserialize(deserializer)
        .map(|list| list.map(|list| list.into_iter().map(|number| number.0).collect()))
}

/// For a field `BTreeMap<String, T>` (with `#[serde(default)]`).
pub fn whole_map<'de, D: Deserializer<'de>, T: BodyInteger>(
    deserializer: D,
) -> Result<BTreeMap<String, T>, D::Error> {
    BTreeMap::<String, WholeNumber<T>>::deserialize(deserializer).map(|map| {
        map.into_iter()
            .map(|(key, number)| (key, number.0))
            .collect()
    })
}

/// For a field `Option<BTreeMap<String, Option<T>>>` (with `#[serde(default)]`).
pub fn optional_map_of_optional_whole<'de, D: Deserializer<'de>, T: BodyInteger>(
    deserializer: D,
) -> Result<Option<BTreeMap<String, Option<T>>>, D::Error> {
    Option::<BTreeMap<String, Option<WholeNumber<T>>>>::deserialize(deserializer).map(|map| {
        map.map(|map| {
            map.into_iter()
                .map(|(key, number)| (key, number.map(|number| number.0)))
                .collect()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Body {
        #[serde(default, deserialize_with = "optional_whole")]
        top_k: Option<u32>,
    }

    #[derive(Deserialize)]
    struct BigBody {
        #[serde(default, deserialize_with = "optional_whole")]
        quota: Option<u64>,
    }

    fn top_k(json: &str) -> Result<Option<u32>, String> {
        serde_json::from_str::<Body>(json)
            .map(|body| body.top_k)
            .map_err(|error| error.to_string())
    }

    #[test]
    fn integers_and_floats_without_a_fraction_are_the_same_number() {
        assert_eq!(top_k(r#"{"top_k": 300}"#), Ok(Some(300)));
        assert_eq!(top_k(r#"{"top_k": 300.0}"#), Ok(Some(300)));
        assert_eq!(top_k(r#"{"top_k": 3e2}"#), Ok(Some(300)));
        assert_eq!(top_k(r#"{"top_k": null}"#), Ok(None));
        let big: Result<Option<u64>, String> =
            serde_json::from_str::<BigBody>(r#"{"quota": 2251799813685247.0}"#)
                .map(|body| body.quota)
                .map_err(|error| error.to_string());
        assert_eq!(big, Ok(Some(2_251_799_813_685_247)));
        assert_eq!(top_k(r#"{}"#), Ok(None));
    }

    #[test]
    fn fractions_strings_and_out_of_range_numbers_are_refused_with_the_range() {
        for json in [
            r#"{"top_k": 300.5}"#,
            r#"{"top_k": -1}"#,
            r#"{"top_k": 4294967296}"#,
            r#"{"top_k": 1e300}"#,
            r#"{"top_k": "3"}"#,
        ] {
            let error = top_k(json).expect_err(json);
            assert!(
                error.contains("an integer from 0 to 4294967295"),
                "{json}: {error}"
            );
        }
    }
}
