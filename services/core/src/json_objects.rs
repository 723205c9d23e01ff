//! Nested objects of request bodies read only from JSON objects: serde's derive would also
//! fill a struct from an array (`[null, null]`), which the published schema does not allow.
//! Used through `#[serde(deserialize_with)]`; field paths in errors stay as they were.

use serde::de::{Deserialize, Deserializer, Visitor};

/// A struct read from a JSON object only.
pub struct JsonObject<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for JsonObject<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(StructFromMapOnly(deserializer)).map(JsonObject)
    }
}

/// Hands a struct's visitor the map form only.
struct StructFromMapOnly<D>(D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for StructFromMapOnly<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// For a field `T` (a struct).
pub fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    JsonObject::deserialize(deserializer).map(|object| object.0)
}

/// For a field `Option<T>` (with `#[serde(default)]`).
pub fn optional_object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    Option::<JsonObject<T>>::deserialize(deserializer).map(|object| object.map(|object| object.0))
}

/// For a field `Vec<T>`.
pub fn object_list<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Vec<T>, D::Error> {
    Vec::<JsonObject<T>>::deserialize(deserializer)
        .map(|list| list.into_iter().map(|object| object.0).collect())
}

/// For a field `Option<Vec<T>>` (with `#[serde(default)]`).
pub fn optional_object_list<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Vec<T>>, D::Error> {
    Option::<Vec<JsonObject<T>>>::deserialize(deserializer)
        .map(|list| list.map(|list| list.into_iter().map(|object| object.0).collect()))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Budget {
        max_results: Option<u32>,
    }

    #[derive(Debug, Deserialize)]
    struct Body {
        #[serde(default, deserialize_with = "super::object")]
        recall: Budget,
        #[serde(default, deserialize_with = "super::optional_object_list")]
        items: Option<Vec<Budget>>,
    }

    #[test]
    fn nested_structs_come_from_objects_and_never_from_arrays() {
        let body: Body =
            serde_json::from_str(r#"{"recall": {"max_results": 3}, "items": [{}]}"#).unwrap();
        assert_eq!(body.recall.max_results, Some(3));
        assert_eq!(body.items, Some(vec![Budget::default()]));
        for json in [r#"{"recall": [null]}"#, r#"{"items": [[5]]}"#] {
            let error = serde_json::from_str::<Body>(json).unwrap_err().to_string();
            assert!(error.contains("invalid type: sequence"), "{json}: {error}");
        }
        let error = serde_json::from_str::<Body>(r#"{"recall": {"x": 1}}"#).unwrap_err();
        assert!(error.to_string().contains("unknown field `x`"), "{error}");
    }
}
