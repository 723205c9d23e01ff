//! Recall quality in domain terms: what a project keeps of each search (its recall events),
//! and the arithmetic of evaluation (hit@k, recall@k, MRR, nDCG, percentiles, the confidence
//! interval of a paired difference). Pure functions, tested here.
use crate::memory::MemoryState;
use crate::tasks::TaskStatus;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Days recall events are kept unless the project says otherwise.
pub const DEFAULT_RECALL_EVENT_RETENTION_DAYS: u32 = 30;
/// Longest recall event retention a project may set.
pub const MAX_RECALL_EVENT_RETENTION_DAYS: u32 = 3_650;

/// What a project records of each search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RecallEventCapture {
    /// Everything, the query text included.
    #[default]
    Full,
    /// Everything but the query text.
    NoText,
    /// No recall events (and so no recall metrics).
    Off,
}

impl RecallEventCapture {
    pub const fn as_str(self) -> &'static str {
        match self {
            RecallEventCapture::Full => "full",
            RecallEventCapture::NoText => "no_text",
            RecallEventCapture::Off => "off",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "full" => Some(RecallEventCapture::Full),
            "no_text" => Some(RecallEventCapture::NoText),
            "off" => Some(RecallEventCapture::Off),
            _ => None,
        }
    }
}

/// How one labelled query fared: the 1-based ranks of the relevant results among those
/// returned (ascending), and how many relevant memories there are in all.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CaseOutcome {
    pub relevant_ranks: Vec<usize>,
    pub relevant_total: usize,
}

impl CaseOutcome {
    /// 1 when a relevant memory is in the first `k`, else 0.
    pub fn hit_at(&self, k: usize) -> f64 {
        if self.relevant_ranks.iter().any(|rank| *rank <= k) {
            1.0
        } else {
            0.0
        }
    }

    /// Share of the relevant memories found in the first `k`.
    pub fn recall_at(&self, k: usize) -> f64 {
        if self.relevant_total == 0 {
            return 0.0;
        }
        let found = self
            .relevant_ranks
            .iter()
            .filter(|rank| **rank <= k)
            .count();
        found as f64 / self.relevant_total as f64
    }

    /// 1 / rank of the first relevant result within `k`, 0 when there is none.
    pub fn reciprocal_rank(&self, k: usize) -> f64 {
        self.relevant_ranks
            .iter()
            .copied()
            .filter(|rank| *rank <= k)
            .min()
            .map_or(0.0, |rank| 1.0 / rank as f64)
    }

    /// nDCG@k with binary relevance: DCG over the ideal DCG of `min(relevant, k)` hits.
    pub fn ndcg_at(&self, k: usize) -> f64 {
        let ideal_hits = self.relevant_total.min(k);
        if ideal_hits == 0 {
            return 0.0;
        }
        let gain = |rank: usize| 1.0 / ((rank as f64) + 1.0).log2();
        let dcg: f64 = self
            .relevant_ranks
            .iter()
            .copied()
            .filter(|rank| *rank <= k)
            .map(gain)
            .sum();
        let ideal: f64 = (1..=ideal_hits).map(gain).sum();
        // `+ 0.0` turns the -0.0 an empty float sum gives into 0.
        dcg / ideal + 0.0
    }
}

/// The `percentile` (0–100) of `sorted` by the nearest-rank method; `None` when empty.
pub fn nearest_rank_percentile<T: Copy>(sorted: &[T], percentile: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((percentile / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Mean of paired differences `b - a` with its 95 % confidence interval (normal
/// approximation: mean ± 1.96 · sd / √n). `None` without pairs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairedDifference {
    pub mean: f64,
    pub low: f64,
    pub high: f64,
    pub pairs: usize,
}

pub fn paired_difference(a: &[f64], b: &[f64]) -> Option<PairedDifference> {
    let differences: Vec<f64> = a.iter().zip(b).map(|(a, b)| b - a).collect();
    let pairs = differences.len();
    if pairs == 0 {
        return None;
    }
    let mean = differences.iter().sum::<f64>() / pairs as f64;
    let half_width = if pairs > 1 {
        let variance = differences
            .iter()
            .map(|difference| (difference - mean).powi(2))
            .sum::<f64>()
            / (pairs - 1) as f64;
        1.96 * variance.sqrt() / (pairs as f64).sqrt()
    } else {
        0.0
    };
    Some(PairedDifference {
        mean,
        low: mean - half_width,
        high: mean + half_width,
        pairs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(left: f64, right: f64) -> bool {
        (left - right).abs() < 1e-9
    }

    #[test]
    fn ranking_metrics_of_one_case() {
        let outcome = CaseOutcome {
            relevant_ranks: vec![2, 5],
            relevant_total: 3,
        };
        assert_eq!(outcome.hit_at(1), 0.0);
        assert_eq!(outcome.hit_at(2), 1.0);
        assert!(close(outcome.recall_at(5), 2.0 / 3.0));
        assert!(close(outcome.reciprocal_rank(10), 0.5));
        assert_eq!(outcome.reciprocal_rank(1), 0.0);
        let dcg = 1.0 / 3f64.log2() + 1.0 / 6f64.log2();
        let ideal = 1.0 + 1.0 / 3f64.log2() + 0.5;
        assert!(close(outcome.ndcg_at(10), dcg / ideal));
        let perfect = CaseOutcome {
            relevant_ranks: vec![1],
            relevant_total: 1,
        };
        assert!(close(perfect.ndcg_at(10), 1.0));
        assert_eq!(CaseOutcome::default().ndcg_at(10), 0.0);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let sorted: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank_percentile(&sorted, 50.0), Some(50));
        assert_eq!(nearest_rank_percentile(&sorted, 95.0), Some(95));
        assert_eq!(nearest_rank_percentile(&sorted, 99.0), Some(99));
        assert_eq!(nearest_rank_percentile(&[7u64], 99.0), Some(7));
        assert_eq!(nearest_rank_percentile::<u64>(&[], 50.0), None);
    }

    #[test]
    fn paired_difference_with_interval() {
        let difference = paired_difference(&[0.0, 0.0, 1.0, 1.0], &[1.0, 1.0, 1.0, 1.0]).unwrap();
        assert!(close(difference.mean, 0.5));
        // sd of [1, 1, 0, 0] is √(1/3); half width 1.96 · 0.57735 / 2.
        assert!(close(
            difference.high - difference.mean,
            1.96 * (1.0f64 / 3.0).sqrt() / 2.0
        ));
        assert!(paired_difference(&[], &[]).is_none());
    }

    #[test]
    fn capture_settings_parse() {
        for capture in [
            RecallEventCapture::Full,
            RecallEventCapture::NoText,
            RecallEventCapture::Off,
        ] {
            assert_eq!(RecallEventCapture::parse(capture.as_str()), Some(capture));
        }
        assert_eq!(RecallEventCapture::parse("some"), None);
    }
}

text_enum!(
    /// What started an evaluation run.
    EvalTrigger {
        Manual => "manual",
        Scheduled => "scheduled",
    }
);

/// One labelled query.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvalCase {
    pub query: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    /// `{kinds, session_id, metadata, categories}` as the search takes them.
    pub filters: serde_json::Value,
    pub expected_memory_ids: Vec<String>,
    pub expected_contents: Vec<String>,
    pub query_vector: Option<Vec<f32>>,
}

/// One search as it is recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRecallEvent {
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    /// `None` when the project keeps no query text.
    pub query_text: Option<String>,
    pub profile: String,
    pub retrieval: String,
    pub filters: serde_json::Value,
    /// `[{memory_id, version, rank, score}]`, best first (a context's: what it packed).
    pub results: serde_json::Value,
    pub result_count: u32,
    pub top_score: Option<f64>,
    pub total_micros: u64,
    pub timings: serde_json::Value,
    pub trace_id: Option<String>,
    pub credential: String,
    /// The door the search came through (`http`, `console`, `mem0`, `mcp`, ...); `None`
    /// for events recorded before channels were.
    pub channel: Option<String>,
    /// The agent run the search or context was linked to.
    pub run_id: Option<Uuid>,
    /// `search` (a search's results) or `context` (the memories an assembled context packed).
    pub purpose: String,
}

/// A recall event's purpose: a search.
pub const RECALL_PURPOSE_SEARCH: &str = "search";
/// A recall event's purpose: the memories part of an assembled context.
pub const RECALL_PURPOSE_CONTEXT: &str = "context";

impl NewRecallEvent {
    /// The uses of memories this event records: each result at its version, `returned` by
    /// a search or `packed` into a context.
    pub fn memory_uses(&self) -> Vec<crate::runs::NewMemoryUse> {
        let kind = if self.purpose == RECALL_PURPOSE_CONTEXT {
            crate::runs::MemoryUseKind::Packed
        } else {
            crate::runs::MemoryUseKind::Returned
        };
        self.results
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|result| {
                let memory_id = result.get("memory_id")?.as_str()?.parse().ok()?;
                let version = result.get("version")?.as_i64()?;
                Some(crate::runs::NewMemoryUse {
                    memory: crate::runs::MemoryAtVersion { memory_id, version },
                    kind,
                    used_at: self.created_at,
                    recall_id: Some(self.id),
                    run_id: self.run_id,
                    user_id: self.user_id.clone(),
                })
            })
            .collect()
    }
}

/// A stored recall event.
pub type RecallEventRecord = NewRecallEvent;

/// A named set of search parameters, and the share of searches it serves.
#[derive(Clone, Debug, PartialEq)]
pub struct RetrievalProfileRecord {
    pub name: String,
    pub parameters: serde_json::Value,
    pub traffic_share: f64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EvalSetRecord {
    pub id: Uuid,
    pub name: String,
    pub k: u32,
    pub regression_threshold: f64,
    pub schedule_interval_secs: Option<u64>,
    pub profile: Option<String>,
    pub created_at: DateTime<Utc>,
    pub cases: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EvalCaseRecord {
    pub id: Uuid,
    pub case: NewEvalCase,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EvalRunRecord {
    pub id: Uuid,
    pub set_id: Uuid,
    pub task_id: Uuid,
    pub profile: String,
    pub compare_profile: Option<String>,
    pub trigger: EvalTrigger,
    pub status: TaskStatus,
    pub metrics: Option<serde_json::Value>,
    pub comparison: Option<serde_json::Value>,
    pub regression: bool,
    pub regression_reasons: Vec<String>,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// What became of a recalled memory since.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryFate {
    pub state: MemoryState,
    pub updated_at: DateTime<Utc>,
}
