//! Retrieval profiles: named search tunings (retrieval mode, fusion, weights, diversity,
//! minimum score) a project compares, sends a share of its traffic to, or evaluates.

use crate::search_request::{FusionMethod, RetrievalMode, SearchRequest};
use engram_core::FieldError;
use serde_json::{Map, Value, json};

/// The profile name of a search that used no profile.
pub const DEFAULT_PROFILE: &str = "default";

/// The search parameters a profile sets; unset ones keep the search's defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SearchTuning {
    pub retrieval: Option<RetrievalMode>,
    pub fusion: Option<FusionMethod>,
    pub keyword_weight: Option<f32>,
    pub recency_weight: Option<f32>,
    pub diversify: Option<bool>,
    pub min_score: Option<f32>,
}

impl SearchTuning {
    /// From `{"retrieval": "dense", "keyword_weight": 0.3, …}`; unknown keys and bad values
    /// are errors naming `field.<key>`.
    pub fn parse(value: &Value, field: &str) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        let Some(object) = value.as_object() else {
            return Err(vec![FieldError::new(field, "must be a JSON object")]);
        };
        let mut tuning = SearchTuning::default();
        for (key, value) in object {
            let path = format!("{field}.{key}");
            match key.as_str() {
                "retrieval" => match value.as_str().map(str::parse::<RetrievalMode>) {
                    Some(Ok(mode)) => tuning.retrieval = Some(mode),
                    Some(Err(message)) => errors.push(FieldError::new(path, message)),
                    None => errors.push(FieldError::new(path, "must be a string")),
                },
                "fusion" => match value.as_str().map(str::parse::<FusionMethod>) {
                    Some(Ok(method)) => tuning.fusion = Some(method),
                    Some(Err(message)) => errors.push(FieldError::new(path, message)),
                    None => errors.push(FieldError::new(path, "must be a string")),
                },
                "keyword_weight" | "recency_weight" | "min_score" => {
                    match value.as_f64().filter(|number| (0.0..=1.0).contains(number)) {
                        Some(number) => {
                            let number = Some(number as f32);
                            match key.as_str() {
                                "keyword_weight" => tuning.keyword_weight = number,
                                "recency_weight" => tuning.recency_weight = number,
                                _ => tuning.min_score = number,
                            }
                        }
                        None => errors.push(FieldError::new(path, "must be a number between 0 and 1")),
                    }
                }
                "diversify" => match value.as_bool() {
                    Some(flag) => tuning.diversify = Some(flag),
                    None => errors.push(FieldError::new(path, "must be true or false")),
                },
                _ => errors.push(FieldError::new(
                    path,
                    "unknown parameter; one of retrieval, fusion, keyword_weight, recency_weight, diversify, min_score",
                )),
            }
        }
        if errors.is_empty() {
            Ok(tuning)
        } else {
            Err(errors)
        }
    }

    /// The parameters that are set, as the API shows them.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        if let Some(mode) = self.retrieval {
            object.insert("retrieval".into(), json!(mode.as_str()));
        }
        if let Some(method) = self.fusion {
            object.insert("fusion".into(), json!(method.as_str()));
        }
        for (key, value) in [
            ("keyword_weight", self.keyword_weight),
            ("recency_weight", self.recency_weight),
            ("min_score", self.min_score),
        ] {
            if let Some(value) = value {
                object.insert(key.into(), json!((value as f64 * 1e6).round() / 1e6));
            }
        }
        if let Some(flag) = self.diversify {
            object.insert("diversify".into(), json!(flag));
        }
        Value::Object(object)
    }

    /// Set what the profile sets on a search.
    pub fn apply(&self, request: &mut SearchRequest) {
        if let Some(mode) = self.retrieval {
            request.retrieval = mode;
        }
        if let Some(method) = self.fusion {
            request.fusion = method;
        }
        if let Some(weight) = self.keyword_weight {
            request.keyword_weight = weight;
        }
        if let Some(weight) = self.recency_weight {
            request.recency_weight = weight;
        }
        if let Some(flag) = self.diversify {
            request.diversify = flag;
        }
        if let Some(score) = self.min_score {
            request.min_score = score;
        }
    }
}

/// Which profile serves a search that named none: the first whose cumulative traffic share
/// exceeds `draw` (uniform in [0, 1)), else none (the default).
pub fn profile_for_draw(profiles: &[(String, f64)], draw: f64) -> Option<&str> {
    let mut cumulative = 0.0;
    for (name, share) in profiles {
        cumulative += share;
        if draw < cumulative {
            return Some(name);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunings_parse_round_trip_and_apply() {
        let value = json!({"retrieval": "dense", "keyword_weight": 0.25, "diversify": false});
        let tuning = SearchTuning::parse(&value, "parameters").unwrap();
        assert_eq!(tuning.retrieval, Some(RetrievalMode::Dense));
        assert_eq!(tuning.to_json(), value);
        let mut request = SearchRequest::default();
        tuning.apply(&mut request);
        assert_eq!(request.retrieval, RetrievalMode::Dense);
        assert!(!request.diversify);
        assert_eq!(request.keyword_weight, 0.25);
        assert_eq!(
            request.fusion,
            FusionMethod::Weighted,
            "unset stays default"
        );
    }

    #[test]
    fn bad_tunings_name_the_field() {
        let errors = SearchTuning::parse(
            &json!({"retrieval": "magic", "keyword_weight": 2, "colour": "red"}),
            "parameters",
        )
        .unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|error| error.field.as_str()).collect();
        assert!(fields.contains(&"parameters.retrieval"));
        assert!(fields.contains(&"parameters.keyword_weight"));
        assert!(fields.contains(&"parameters.colour"));
    }

    #[test]
    fn traffic_is_split_by_cumulative_share() {
        let profiles = vec![("a".to_string(), 0.2), ("b".to_string(), 0.3)];
        assert_eq!(profile_for_draw(&profiles, 0.1), Some("a"));
        assert_eq!(profile_for_draw(&profiles, 0.2), Some("b"));
        assert_eq!(profile_for_draw(&profiles, 0.49), Some("b"));
        assert_eq!(profile_for_draw(&profiles, 0.5), None);
    }
}
