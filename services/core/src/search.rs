//! What a search asks for: the query, whose memories, which filters, how many results, how to
//! retrieve and rank them, and the tuning a retrieval profile sets. Plain values (no IO), so
//! profiles, evaluation runs, the search itself and the fuzzer can all name them.

use crate::{FieldError, MemoryFilter, MemoryKind, SubjectFilter};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

/// Which signals rank the results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RetrievalMode {
    /// Dense and keyword search fused (the default).
    #[default]
    Hybrid,
    /// Cosine similarity of the embeddings only.
    Dense,
    /// BM25 over the memory text only (nothing is embedded).
    Keyword,
}

impl RetrievalMode {
    pub const ALL: [RetrievalMode; 3] = [Self::Hybrid, Self::Dense, Self::Keyword];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hybrid => "hybrid",
            Self::Dense => "dense",
            Self::Keyword => "keyword",
        }
    }
}

impl std::str::FromStr for RetrievalMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|mode| mode.as_str() == text)
            .ok_or_else(|| format!("must be one of hybrid, dense, keyword; got {text:?}"))
    }
}

/// How the dense and keyword signals are combined in hybrid mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FusionMethod {
    /// `(1 − w) · cosine + w · BM25 / best BM25`: keeps how strong each match is.
    #[default]
    Weighted,
    /// Reciprocal rank fusion (k = 60) of the two rankings, weighted the same way and scaled
    /// to 0–1: only the ranks count.
    Rrf,
}

impl FusionMethod {
    pub const ALL: [FusionMethod; 2] = [Self::Weighted, Self::Rrf];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Weighted => "weighted",
            Self::Rrf => "rrf",
        }
    }
}

impl std::str::FromStr for FusionMethod {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|method| method.as_str() == text)
            .ok_or_else(|| format!("must be one of weighted, rrf; got {text:?}"))
    }
}

/// Weight of the keyword signal in the hybrid score when the request names none.
pub const DEFAULT_KEYWORD_WEIGHT: f32 = 0.5;
/// Largest recency bonus, for a memory valid from right now; halves every half-life.
pub const DEFAULT_RECENCY_WEIGHT: f32 = 0.05;
/// How far a memory rises toward its best neighbour's score when the request names none: a
/// conversation's answer often sits a turn or two from the turn that matches the question
/// ("What did you paint?" — "A sunset."). Measured on LoCoMo dev (`bench-recall`): 0.3 to
/// 0.9 all lift hit@10 from .73 to .79–.82; 0.5 is the middle of that plateau.
pub const DEFAULT_NEIGHBOUR_WEIGHT: f32 = 0.5;
/// How far a neighbour may be: memories of the same session at most this many writes apart.
pub const NEIGHBOUR_REACH: usize = 2;
pub const RECENCY_HALF_LIFE_DAYS: f64 = 30.0;
/// Bonus of a memory from the session named in the request (unless it filters by it).
pub const SESSION_BOOST: f32 = 0.05;
/// A result at least this similar (cosine of the embeddings) to a better one is left out
/// when diversifying.
pub const NEAR_DUPLICATE_SIMILARITY: f32 = 0.97;
/// A result's relevance — the scale a relevance floor compares, the same for every query
/// (unlike the ranking score, whose keyword part is relative to the query's best match):
/// the cosine (at least 0) plus a keyword bonus of at most [`RELEVANCE_KEYWORD_BONUS`], the
/// BM25 score saturated at [`RELEVANCE_KEYWORD_HALF`], capped at 1. An added bonus, not a
/// share of the score: BM25 runs low in a small project (few documents, low IDF), and a
/// share would take from a good cosine what the keywords cannot give. Chosen on LoCoMo dev
/// with questions asked of the wrong end-user (see the engine's reference).
pub const RELEVANCE_KEYWORD_BONUS: f32 = 0.2;
/// The BM25 score at which the keyword bonus is half its most.
pub const RELEVANCE_KEYWORD_HALF: f32 = 16.0;

/// The relevance of a result with this cosine and BM25 score (see
/// [`RELEVANCE_KEYWORD_BONUS`]).
pub fn relevance_of(dense_similarity: f32, keyword_score: Option<f32>) -> f32 {
    let keyword = keyword_score.unwrap_or(0.0).max(0.0);
    let saturated = keyword / (keyword + RELEVANCE_KEYWORD_HALF);
    (dense_similarity.max(0.0) + RELEVANCE_KEYWORD_BONUS * saturated).min(1.0)
}

/// The relevance floors a project on one embedding model gets unless it sets a number.
/// One cosine floor cannot serve both kinds of memory these models meet: on short facts
/// ("Works as a marine biologist in Lisbon.") a right answer can sit at a cosine of 0.17
/// with all-MiniLM-L6-v2, below many conversation turns about someone else (LoCoMo: the best
/// turn of another person's conversation, median 0.36). What tells those apart is a name:
/// asked of the wrong person, a question names someone no memory there mentions. So a low
/// floor holds everywhere, and a higher one where the query names someone or something
/// ([`crate::query_names`]) that no candidate mentions. Measured by bench-recall on LoCoMo
/// dev (each conversation's questions asked of another conversation's end-user, and
/// questions about things never said) and on short facts; the figures are in the engine's
/// reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeasuredFloors {
    /// What every result must clear: below it a memory is no nearer the question than
    /// unrelated text is.
    pub everywhere: f32,
    /// What every result must clear when the query names someone or something that no
    /// candidate mentions (and no candidate is written in a script a Latin name cannot be
    /// matched in: "李伟" may be the "Li Wei" asked about). Compared with the relevance
    /// without its keyword bonus: the words such a memory shares with the question are
    /// about someone else.
    pub unmentioned_name: f32,
}

/// The floors measured for `model_id`; `None` for a model never measured and for client
/// vectors, whose scores are not ours to calibrate.
pub fn measured_relevance_floors(model_id: &str) -> Option<MeasuredFloors> {
    MEASURED_RELEVANCE_FLOORS
        .iter()
        .find(|(model, _)| *model == model_id)
        .map(|(_, floors)| *floors)
}

/// (model id, floors). multilingual-e5-small's cosines sit higher and closer together (an
/// unrelated memory in the question's language near 0.79, a cross-lingual answer at a
/// median of 0.79 too), so its low floor stays under the cross-lingual answers (0.74 keeps
/// 98 % of the bilingual set's) and the name floor does the abstaining.
const MEASURED_RELEVANCE_FLOORS: &[(&str, MeasuredFloors)] = &[
    (
        "all-MiniLM-L6-v2",
        MeasuredFloors {
            everywhere: 0.15,
            unmentioned_name: 0.45,
        },
    ),
    (
        crate::embedding::MULTILINGUAL_E5_MODEL_ID,
        MeasuredFloors {
            everywhere: 0.74,
            unmentioned_name: 0.84,
        },
    ),
];

/// The floor measured for all-MiniLM-L6-v2 on conversational memories (LoCoMo dev): a
/// project whose memories are conversation turns may set it (`relevance_floor`).
pub const CONVERSATION_RELEVANCE_FLOOR: f32 = 0.38;

/// A project's relevance floor: its embedding model's measured floor, or a number it set
/// (0: none). Projects created before floors existed were set to 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RelevanceFloorSetting {
    #[default]
    Model,
    /// In thousandths (0–1000).
    Fixed(u16),
}

impl RelevanceFloorSetting {
    /// `"model"` or a number 0–1 (kept to three decimals).
    pub fn parse(value: &Value, field: &str) -> Result<Self, FieldError> {
        match value {
            Value::String(text) if text == "model" => Ok(Self::Model),
            Value::Number(number) => match number.as_f64() {
                Some(floor) if (0.0..=1.0).contains(&floor) => {
                    Ok(Self::Fixed((floor * 1000.0).round() as u16))
                }
                _ => Err(FieldError::new(
                    field,
                    "must be a number from 0 to 1, or \"model\"",
                )),
            },
            _ => Err(FieldError::new(
                field,
                "must be a number from 0 to 1, or \"model\"",
            )),
        }
    }

    /// The floor searches of a project on `model_id` apply.
    pub fn effective(self, model_id: &str) -> f32 {
        match self {
            Self::Model => {
                measured_relevance_floors(model_id).map_or(0.0, |floors| floors.everywhere)
            }
            Self::Fixed(thousandths) => f32::from(thousandths) / 1000.0,
        }
    }

    /// The floor in place of [`Self::effective`] for a query naming what no candidate
    /// mentions (see [`MeasuredFloors`]); 0 with a number set, which is the one floor.
    pub fn for_unmentioned_names(self, model_id: &str) -> f32 {
        match self {
            Self::Model => {
                measured_relevance_floors(model_id).map_or(0.0, |floors| floors.unmentioned_name)
            }
            Self::Fixed(_) => 0.0,
        }
    }

    /// `"model"` or the number.
    pub fn to_json(self) -> Value {
        match self {
            Self::Model => Value::String("model".to_string()),
            Self::Fixed(thousandths) => serde_json::json!(f64::from(thousandths) / 1000.0),
        }
    }

    /// As stored: `NULL` for the model's floor, thousandths otherwise.
    pub fn from_column(column: Option<i32>) -> Self {
        match column {
            None => Self::Model,
            Some(thousandths) => Self::Fixed(thousandths.clamp(0, 1000) as u16),
        }
    }

    pub fn to_column(self) -> Option<i32> {
        match self {
            Self::Model => None,
            Self::Fixed(thousandths) => Some(i32::from(thousandths)),
        }
    }
}

/// At most this many `always` procedures are returned at task start.
pub const MAX_ALWAYS_PROCEDURES: usize = 20;
/// `as_of` ranks in memory over at most this many memories valid at that time (newest first).
pub const MAX_AS_OF_CANDIDATES: u64 = 5_000;

#[derive(Clone, Debug)]
pub struct SearchRequest {
    pub query: String,
    /// `session_id` boosts that session's memories; it filters only with `session_only`.
    pub subject: SubjectFilter,
    pub session_only: bool,
    pub kinds: Vec<MemoryKind>,
    /// Conditions every result meets, applied before the top-k cut.
    pub filters: MemoryFilter,
    pub top_k: usize,
    pub min_score: f32,
    /// 0–1: results whose relevance (see [`relevance_of`]) is below it are left out — the
    /// project's floor, applied when the caller set no `min_score`. Needs the cosine: a
    /// search without one (keyword retrieval) is not floored.
    pub relevance_floor: f32,
    /// 0–1: the floor in place of `relevance_floor`, when higher, for a hybrid search whose
    /// query names someone or something no candidate mentions (see [`MeasuredFloors`]).
    pub unmentioned_name_floor: f32,
    pub retrieval: RetrievalMode,
    pub fusion: FusionMethod,
    /// 0–1: share of the keyword signal in the hybrid score.
    pub keyword_weight: f32,
    /// 0–1: largest bonus for recency (see [`RECENCY_HALF_LIFE_DAYS`]).
    pub recency_weight: f32,
    /// 0–1: how far a memory rises toward the best score among its neighbours (the memories
    /// of its session at most [`NEIGHBOUR_REACH`] writes away that are candidates too): this
    /// share of the difference, when the neighbour scores higher.
    pub neighbour_weight: f32,
    /// Rank what was true at this moment: memories superseded later are candidates too.
    pub as_of: Option<DateTime<Utc>>,
    /// Leave out results nearly identical to a better one.
    pub diversify: bool,
    /// Also return the procedural memories marked `"always": true` (task start).
    pub include_always: bool,
    /// The query's vector, sent by a project that brings its own vectors (required there for
    /// dense and hybrid retrieval, refused elsewhere).
    pub query_vector: Option<Vec<f32>>,
    /// What "yesterday" or "上个月" in the query is read against (default: `as_of`, else the
    /// server's clock).
    /// With `subject.agent_id`: that agent's memories and those shared with every agent
    /// (another agent's `shared` memories, and memories of no agent), instead of the agent's
    /// own only.
    pub include_shared: bool,
    /// 0–1: what a shared memory's score counts for beside the agent's own (1: the same).
    pub shared_weight: f32,
    /// `Some(true)`: verified memories only; `Some(false)`: verified or not, whatever the
    /// project says; `None`: as the project says (its `verified_only_from_other_agents`).
    pub verified_only: Option<bool>,
    /// Which memories must be verified to be found: resolved by the search use case from
    /// `verified_only` and the project's setting.
    pub verification: VerificationRule,
    /// The agent the search serves when it does not filter by one (context assembly reads
    /// every agent's memories for an agent): whose memories count as its own.
    pub for_agent: Option<crate::ExternalId>,
    pub now: Option<DateTime<Utc>>,
}

/// Bonus of a memory whose event time (`occurred_at`) lies in the window of time the query
/// names ("last month", "去年夏天"): a boost, not a filter — relative phrases are loose ("last
/// month" said on the 2nd often means the past weeks), and a memory written without an event
/// time carries its write time, so a filter would hide what a person meant.
pub const TIME_IN_QUERY_BOOST: f32 = 0.1;

impl Default for SearchRequest {
    fn default() -> Self {
        Self {
            query: String::new(),
            subject: SubjectFilter::default(),
            session_only: false,
            kinds: Vec::new(),
            filters: MemoryFilter::everything(),
            top_k: crate::limits::DEFAULT_TOP_K,
            min_score: 0.0,
            relevance_floor: 0.0,
            unmentioned_name_floor: 0.0,
            retrieval: RetrievalMode::Hybrid,
            fusion: FusionMethod::Weighted,
            keyword_weight: DEFAULT_KEYWORD_WEIGHT,
            recency_weight: DEFAULT_RECENCY_WEIGHT,
            neighbour_weight: DEFAULT_NEIGHBOUR_WEIGHT,
            as_of: None,
            diversify: true,
            include_always: false,
            query_vector: None,
            now: None,
            include_shared: false,
            shared_weight: 1.0,
            verified_only: None,
            verification: VerificationRule::Any,
            for_agent: None,
        }
    }
}

/// Which memories a search takes only once verified.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum VerificationRule {
    /// Verified or not.
    #[default]
    Any,
    /// Verified ones, and unverified ones of these agents (the searcher's own): empty means
    /// verified ones only.
    VerifiedUnlessOf(Vec<String>),
}

impl VerificationRule {
    /// Whether `memory` passes.
    pub fn admits(&self, memory: &crate::Memory) -> bool {
        match self {
            VerificationRule::Any => true,
            VerificationRule::VerifiedUnlessOf(own) => {
                memory.verified_at.is_some()
                    || memory
                        .agent_id
                        .as_ref()
                        .is_some_and(|agent| own.iter().any(|own| own == agent.as_str()))
            }
        }
    }
}

/// The search parameters a profile sets; unset ones keep the search's defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SearchTuning {
    pub retrieval: Option<RetrievalMode>,
    pub fusion: Option<FusionMethod>,
    pub keyword_weight: Option<f32>,
    pub recency_weight: Option<f32>,
    pub neighbour_weight: Option<f32>,
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
                "keyword_weight" | "recency_weight" | "neighbour_weight" | "min_score" => {
                    match value.as_f64().filter(|number| (0.0..=1.0).contains(number)) {
                        Some(number) => {
                            let number = Some(number as f32);
                            match key.as_str() {
                                "keyword_weight" => tuning.keyword_weight = number,
                                "recency_weight" => tuning.recency_weight = number,
                                "neighbour_weight" => tuning.neighbour_weight = number,
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
                    "unknown parameter; one of retrieval, fusion, keyword_weight, recency_weight, neighbour_weight, diversify, min_score",
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
            ("neighbour_weight", self.neighbour_weight),
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
        if let Some(weight) = self.neighbour_weight {
            request.neighbour_weight = weight;
        }
        if let Some(flag) = self.diversify {
            request.diversify = flag;
        }
        if let Some(score) = self.min_score {
            request.min_score = score;
        }
    }
}

impl SearchTuning {
    /// Sets nothing.
    pub fn is_empty(&self) -> bool {
        *self == SearchTuning::default()
    }

    /// Apply this profile's parameters to `request` wherever the caller set none.
    pub fn fill_unset(&self, request: &mut SearchRequest, caller: &SearchTuning) {
        fn take<T: Copy>(field: &mut T, profile: Option<T>, caller: Option<T>) {
            if caller.is_none()
                && let Some(value) = profile
            {
                *field = value;
            }
        }
        take(&mut request.retrieval, self.retrieval, caller.retrieval);
        take(&mut request.fusion, self.fusion, caller.fusion);
        take(
            &mut request.keyword_weight,
            self.keyword_weight,
            caller.keyword_weight,
        );
        take(
            &mut request.recency_weight,
            self.recency_weight,
            caller.recency_weight,
        );
        take(
            &mut request.neighbour_weight,
            self.neighbour_weight,
            caller.neighbour_weight,
        );
        take(&mut request.min_score, self.min_score, caller.min_score);
        take(&mut request.diversify, self.diversify, caller.diversify);
    }
}

/// A search as every door hands it to the search use case.
pub struct SearchMemoriesRequest {
    /// The request with the caller's own tuning (or the defaults where it set none).
    pub request: SearchRequest,
    /// The tuning the caller set explicitly: a profile fills in only what is unset here.
    pub caller_tuning: SearchTuning,
    /// The retrieval profile the caller named, if any.
    pub profile: Option<String>,
    /// Pack the returned memories into a prompt-ready text of at most this many tokens.
    pub context_tokens: Option<u64>,
    /// The W3C trace id the caller sent, kept with the recall event.
    pub trace_id: Option<String>,
    /// The agent run the search is linked to (it appears in the run's timeline).
    pub run_id: Option<uuid::Uuid>,
}

/// Largest `context_tokens` a search may ask its results to be packed into.
pub const MAX_CONTEXT_TOKENS: u64 = 8_192;

impl SearchMemoriesRequest {
    /// What is wrong with the search against the documented limits, one error per field,
    /// named as the API names it. Every door's search is held to them here; a door may call
    /// it beside its own parsing to report every bad field in one answer.
    pub fn limit_errors(&self) -> Vec<crate::FieldError> {
        use crate::FieldError;
        use crate::limits::{MAX_QUERY_BYTES, MAX_TOP_K};
        let request = &self.request;
        let mut errors = Vec::new();
        if request.query.trim().is_empty() {
            errors.push(FieldError::new("query", "must not be empty"));
        } else if request.query.len() > MAX_QUERY_BYTES {
            errors.push(FieldError::new(
                "query",
                format!("must be at most {MAX_QUERY_BYTES} bytes"),
            ));
        }
        if !(1..=MAX_TOP_K).contains(&request.top_k) {
            errors.push(FieldError::new(
                "top_k",
                format!("must be between 1 and {MAX_TOP_K}, got {}", request.top_k),
            ));
        }
        for (field, value) in [
            ("min_score", request.min_score),
            ("keyword_weight", request.keyword_weight),
            ("recency_weight", request.recency_weight),
            ("neighbour_weight", request.neighbour_weight),
            ("shared_weight", request.shared_weight),
        ] {
            if !(0.0..=1.0).contains(&value) {
                errors.push(FieldError::new(
                    field,
                    format!("must be between 0 and 1, got {value}"),
                ));
            }
        }
        // A little slack for clocks that run slightly ahead of ours.
        if let Some(as_of) = request.as_of
            && as_of > chrono::Utc::now() + chrono::Duration::minutes(5)
        {
            errors.push(FieldError::new("as_of", "must not be in the future"));
        }
        if request.include_shared && request.subject.agent_id.is_none() {
            errors.push(FieldError::new(
                "include_shared",
                "needs an agent_id whose memories the shared ones join",
            ));
        }
        if request.session_only && request.subject.session_id.is_none() {
            errors.push(FieldError::new(
                "session_only",
                "needs a session_id to filter by",
            ));
        }
        if let Some(tokens) = self.context_tokens
            && !(1..=MAX_CONTEXT_TOKENS).contains(&tokens)
        {
            errors.push(FieldError::new(
                "context_tokens",
                format!("must be between 1 and {MAX_CONTEXT_TOKENS}, got {tokens}"),
            ));
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_setting_means_each_models_measured_floors_and_a_number_is_the_one_floor() {
        let model = RelevanceFloorSetting::Model;
        assert_eq!(model.effective("all-MiniLM-L6-v2"), 0.15);
        assert_eq!(model.for_unmentioned_names("all-MiniLM-L6-v2"), 0.45);
        assert_eq!(
            model.effective(crate::embedding::MULTILINGUAL_E5_MODEL_ID),
            0.74
        );
        // Client vectors and models never measured: no floor at all.
        assert_eq!(model.effective("client-vectors-3"), 0.0);
        assert_eq!(model.for_unmentioned_names("client-vectors-3"), 0.0);
        let fixed = RelevanceFloorSetting::parse(&serde_json::json!(0.38), "floor").unwrap();
        assert_eq!(fixed.effective("all-MiniLM-L6-v2"), 0.38);
        assert_eq!(fixed.for_unmentioned_names("all-MiniLM-L6-v2"), 0.0);
    }

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
}
