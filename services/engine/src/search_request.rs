//! What a search asks for lives in engram-core (`engram_core::search`), where the request
//! parsers can be fuzzed without the stack; the engine names it from here.

pub use engram_core::search::{
    DEFAULT_KEYWORD_WEIGHT, DEFAULT_RECENCY_WEIGHT, FusionMethod, MAX_ALWAYS_PROCEDURES,
    MAX_AS_OF_CANDIDATES, NEAR_DUPLICATE_SIMILARITY, NEIGHBOUR_REACH, RECENCY_HALF_LIFE_DAYS,
    RetrievalMode, SESSION_BOOST, SearchRequest, TIME_IN_QUERY_BOOST, relevance_of,
};
