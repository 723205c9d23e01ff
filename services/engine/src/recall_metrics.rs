//! Live recall quality of a project over a time window, computed from its recall events:
//! volume, latency percentiles, empty-recall rate, top-score distribution, precision from
//! feedback, the share of recalled memories later superseded or corrected, the queries that
//! found nothing, and the same figures per retrieval profile and per hour or day.

use crate::{EngineError, MemoryEngine};
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use engram_core::recall::nearest_rank_percentile;
use engram_core::{MemoryId, MemoryState, ProjectScope};
use engram_storage::feedback::FeedbackRecord;
use engram_storage::recall_quality::{MemoryFate, RecallEventRecord};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use uuid::Uuid;

/// Queries that found nothing, listed at most.
const EMPTY_QUERIES_LISTED: usize = 10;
/// Buckets a window may be cut into at most.
pub const MAX_BUCKETS: i64 = 1_000;

/// How a window is cut for the charts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricsBucket {
    Hour,
    Day,
}

impl MetricsBucket {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "hour" => Some(MetricsBucket::Hour),
            "day" => Some(MetricsBucket::Day),
            _ => None,
        }
    }

    /// The bucket a window gets when the caller names none: hours for up to two days,
    /// days beyond.
    pub fn fitting(from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        if to - from <= TimeDelta::days(2) {
            MetricsBucket::Hour
        } else {
            MetricsBucket::Day
        }
    }

    fn width(self) -> TimeDelta {
        match self {
            MetricsBucket::Hour => TimeDelta::hours(1),
            MetricsBucket::Day => TimeDelta::days(1),
        }
    }
}

#[derive(Clone, Debug)]
pub struct MetricsWindow {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub bucket: MetricsBucket,
    /// Only the searches served by this profile.
    pub profile: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencyFigures {
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// The figures of a set of searches.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RecallFigures {
    pub searches: u64,
    /// Searches that returned nothing.
    pub empty: u64,
    pub empty_rate: Option<f64>,
    pub latency: LatencyFigures,
    /// Mean score of the best result of searches that found something.
    pub mean_top_score: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BucketFigures {
    pub start: DateTime<Utc>,
    #[serde(flatten)]
    pub figures: RecallFigures,
    /// Precision of the feedback given on this bucket's recalls.
    pub precision: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FeedbackFigures {
    pub ratings: u64,
    pub relevant: u64,
    pub not_relevant: u64,
    pub wrong: u64,
    /// relevant / ratings.
    pub precision: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RecalledMemoryFigures {
    /// Distinct memories returned by the window's searches.
    pub distinct: u64,
    /// Of those, superseded, deleted or erased, changed after they were recalled, or rated
    /// `wrong`.
    pub superseded_or_corrected: u64,
    pub share: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EmptyQuery {
    /// `null` when the project keeps no query text, or the caller may not read content.
    pub query: Option<String>,
    pub count: u64,
    pub last_seen: DateTime<Utc>,
    /// The newest of its recall events, to drill down into.
    pub last_recall_id: Uuid,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProfileFigures {
    pub profile: String,
    #[serde(flatten)]
    pub figures: RecallFigures,
    pub precision: Option<f64>,
}

/// Top-score histogram: ten bins of width 0.1 from 0 to 1 (the last includes 1).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ScoreHistogram {
    pub bins: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecallMetrics {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub bucket: MetricsBucket,
    pub profile: Option<String>,
    pub totals: RecallFigures,
    pub buckets: Vec<BucketFigures>,
    pub top_score_histogram: ScoreHistogram,
    pub feedback: FeedbackFigures,
    pub recalled_memories: RecalledMemoryFigures,
    pub empty_queries: Vec<EmptyQuery>,
    pub profiles: Vec<ProfileFigures>,
    /// True when the window held more events than are read at once (the newest were used).
    pub truncated: bool,
}

fn rate(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

fn figures<'a>(events: impl Iterator<Item = &'a RecallEventRecord>) -> RecallFigures {
    let mut latencies_micros: Vec<u64> = Vec::new();
    let (mut empty, mut top_scores, mut top_score_sum) = (0u64, 0u64, 0.0f64);
    for event in events {
        latencies_micros.push(event.total_micros);
        if event.result_count == 0 {
            empty += 1;
        }
        if let Some(score) = event.top_score {
            top_scores += 1;
            top_score_sum += score;
        }
    }
    latencies_micros.sort_unstable();
    let percentile =
        |p: f64| nearest_rank_percentile(&latencies_micros, p).map(|micros| micros as f64 / 1000.0);
    let searches = latencies_micros.len() as u64;
    RecallFigures {
        searches,
        empty,
        empty_rate: rate(empty, searches),
        latency: LatencyFigures {
            p50_ms: percentile(50.0),
            p95_ms: percentile(95.0),
            p99_ms: percentile(99.0),
        },
        mean_top_score: (top_scores > 0).then(|| top_score_sum / top_scores as f64),
    }
}

/// The memory ids an event returned.
pub fn recalled_ids(event: &RecallEventRecord) -> Vec<MemoryId> {
    event
        .results
        .as_array()
        .map(|results| {
            results
                .iter()
                .filter_map(|result| result["memory_id"].as_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn feedback_figures<'a>(ratings: impl Iterator<Item = &'a FeedbackRecord>) -> FeedbackFigures {
    let mut figures = FeedbackFigures::default();
    for rating in ratings {
        figures.ratings += 1;
        match rating.rating.as_str() {
            "relevant" => figures.relevant += 1,
            "not_relevant" => figures.not_relevant += 1,
            _ => figures.wrong += 1,
        }
    }
    figures.precision = rate(figures.relevant, figures.ratings);
    figures
}

/// Everything [`RecallMetrics`] holds, from what storage returned. Pure, so it is tested
/// with hand-made events.
pub fn summarize(
    window: &MetricsWindow,
    events: &[RecallEventRecord],
    feedback: &[FeedbackRecord],
    fates: &HashMap<MemoryId, MemoryFate>,
    truncated: bool,
) -> RecallMetrics {
    let totals = figures(events.iter());

    let width = window.bucket.width();
    let first_start = window.from.duration_trunc(width).unwrap_or(window.from);
    let mut by_bucket: BTreeMap<DateTime<Utc>, Vec<&RecallEventRecord>> = BTreeMap::new();
    let mut start = first_start;
    while start < window.to && by_bucket.len() < MAX_BUCKETS as usize {
        by_bucket.insert(start, Vec::new());
        start += width;
    }
    for event in events {
        let start = event
            .created_at
            .duration_trunc(width)
            .unwrap_or(event.created_at);
        by_bucket.entry(start).or_default().push(event);
    }
    // Each rating counts in the bucket of the recall it is about.
    let bucket_of_recall: HashMap<Uuid, DateTime<Utc>> = by_bucket
        .iter()
        .flat_map(|(start, events)| events.iter().map(move |event| (event.id, *start)))
        .collect();
    let mut ratings_by_bucket: HashMap<DateTime<Utc>, Vec<&FeedbackRecord>> = HashMap::new();
    for rating in feedback {
        if let Some(start) = rating.recall_id.and_then(|id| bucket_of_recall.get(&id)) {
            ratings_by_bucket.entry(*start).or_default().push(rating);
        }
    }
    let buckets = by_bucket
        .into_iter()
        .map(|(start, events)| BucketFigures {
            start,
            figures: figures(events.into_iter()),
            precision: feedback_figures(
                ratings_by_bucket.get(&start).into_iter().flatten().copied(),
            )
            .precision,
        })
        .collect();

    let mut bins = vec![0u64; 10];
    for score in events.iter().filter_map(|event| event.top_score) {
        let bin = ((score.clamp(0.0, 1.0) * 10.0) as usize).min(9);
        bins[bin] += 1;
    }

    let feedback_totals = feedback_figures(feedback.iter());

    // First time each memory was recalled in the window.
    let mut first_recalled: HashMap<MemoryId, DateTime<Utc>> = HashMap::new();
    for event in events {
        for id in recalled_ids(event) {
            let first = first_recalled.entry(id).or_insert(event.created_at);
            if event.created_at < *first {
                *first = event.created_at;
            }
        }
    }
    let rated_wrong: HashSet<MemoryId> = feedback
        .iter()
        .filter(|rating| rating.rating == "wrong")
        .filter_map(|rating| rating.memory_id)
        .collect();
    let corrected = first_recalled
        .iter()
        .filter(|(id, recalled_at)| match fates.get(id) {
            None => true,
            Some(fate) => {
                fate.state != MemoryState::Active
                    || fate.updated_at > **recalled_at
                    || rated_wrong.contains(id)
            }
        })
        .count() as u64;
    let distinct = first_recalled.len() as u64;

    let mut empty_groups: HashMap<Option<String>, EmptyQuery> = HashMap::new();
    for event in events.iter().filter(|event| event.result_count == 0) {
        let entry = empty_groups
            .entry(event.query_text.clone())
            .or_insert_with(|| EmptyQuery {
                query: event.query_text.clone(),
                count: 0,
                last_seen: event.created_at,
                last_recall_id: event.id,
            });
        entry.count += 1;
        if event.created_at >= entry.last_seen {
            entry.last_seen = event.created_at;
            entry.last_recall_id = event.id;
        }
    }
    let mut empty_queries: Vec<EmptyQuery> = empty_groups.into_values().collect();
    empty_queries.sort_by(|left, right| {
        right
            .count
            .cmp(&left.count)
            .then(right.last_seen.cmp(&left.last_seen))
    });
    empty_queries.truncate(EMPTY_QUERIES_LISTED);

    let mut profile_names: Vec<&str> = events.iter().map(|event| event.profile.as_str()).collect();
    profile_names.sort_unstable();
    profile_names.dedup();
    let profile_of: HashMap<Uuid, &str> = events
        .iter()
        .map(|event| (event.id, event.profile.as_str()))
        .collect();
    let profiles = profile_names
        .into_iter()
        .map(|name| ProfileFigures {
            profile: name.to_string(),
            figures: figures(events.iter().filter(|event| event.profile == name)),
            precision: feedback_figures(feedback.iter().filter(|rating| {
                rating
                    .recall_id
                    .and_then(|id| profile_of.get(&id))
                    .is_some_and(|profile| *profile == name)
            }))
            .precision,
        })
        .collect();

    RecallMetrics {
        from: window.from,
        to: window.to,
        bucket: window.bucket,
        profile: window.profile.clone(),
        totals,
        buckets,
        top_score_histogram: ScoreHistogram { bins },
        feedback: feedback_totals,
        recalled_memories: RecalledMemoryFigures {
            distinct,
            superseded_or_corrected: corrected,
            share: rate(corrected, distinct),
        },
        empty_queries,
        profiles,
        truncated,
    }
}

impl MemoryEngine {
    /// The recall quality of `scope`'s project over `window`.
    pub(crate) async fn recall_metrics(
        &self,
        scope: &ProjectScope,
        window: &MetricsWindow,
    ) -> Result<RecallMetrics, EngineError> {
        // Everything queued before this request counts.
        self.recall_events.flush().await;
        let events = self
            .storage
            .recall_events_between(scope, window.from, window.to, window.profile.as_deref())
            .await?;
        let truncated =
            events.len() as u64 >= engram_storage::recall_quality::MAX_RECALL_EVENTS_READ;
        let recall_ids: Vec<Uuid> = events.iter().map(|event| event.id).collect();
        let feedback = self.storage.feedback_on_recalls(scope, &recall_ids).await?;
        let mut memory_ids: Vec<MemoryId> = events.iter().flat_map(recalled_ids).collect();
        memory_ids.sort_unstable_by_key(|id| id.as_uuid());
        memory_ids.dedup();
        let fates = self.storage.memory_fates(scope, &memory_ids).await?;
        Ok(summarize(window, &events, &feedback, &fates, truncated))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(
        minute: i64,
        results: &[(MemoryId, f64)],
        micros: u64,
        query: &str,
    ) -> RecallEventRecord {
        let at = DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
            + TimeDelta::minutes(minute);
        RecallEventRecord {
            id: Uuid::now_v7(),
            created_at: at,
            user_id: None,
            agent_id: None,
            session_id: None,
            query_text: Some(query.to_string()),
            profile: "default".to_string(),
            retrieval: "hybrid".to_string(),
            filters: json!({}),
            results: json!(results
                .iter()
                .enumerate()
                .map(|(rank, (id, score))| json!({"memory_id": id.to_string(), "rank": rank + 1, "score": score}))
                .collect::<Vec<_>>()),
            result_count: results.len() as u32,
            top_score: results.first().map(|(_, score)| *score),
            total_micros: micros,
            timings: json!({}),
            trace_id: None,
            credential: "test".to_string(),
            channel: None,
            run_id: None,
            purpose: "search".to_string(),
        }
    }

    #[test]
    fn a_window_of_searches_is_summarized_exactly() {
        let (a, b) = (MemoryId::generate(), MemoryId::generate());
        let events = vec![
            event(0, &[(a, 0.9), (b, 0.4)], 10_000, "tea"),
            event(5, &[], 20_000, "unicorns"),
            event(70, &[(a, 0.55)], 30_000, "tea again"),
            event(75, &[], 40_000, "unicorns"),
        ];
        let window = MetricsWindow {
            from: events[0].created_at,
            to: events[0].created_at + TimeDelta::hours(2),
            bucket: MetricsBucket::Hour,
            profile: None,
        };
        let mut fates = HashMap::new();
        fates.insert(
            a,
            MemoryFate {
                state: MemoryState::Active,
                updated_at: events[0].created_at - TimeDelta::days(1),
            },
        );
        fates.insert(
            b,
            MemoryFate {
                state: MemoryState::Superseded,
                updated_at: events[0].created_at + TimeDelta::minutes(1),
            },
        );
        let feedback = vec![FeedbackRecord {
            id: Uuid::now_v7(),
            memory_id: Some(a),
            recall_id: Some(events[0].id),
            user_id: None,
            rating: "relevant".to_string(),
            text: None,
            correction: None,
            created_at: events[0].created_at,
        }];
        let metrics = summarize(&window, &events, &feedback, &fates, false);
        assert_eq!(metrics.totals.searches, 4);
        assert_eq!(metrics.totals.empty, 2);
        assert_eq!(metrics.totals.empty_rate, Some(0.5));
        assert_eq!(metrics.totals.latency.p50_ms, Some(20.0));
        assert_eq!(metrics.totals.latency.p95_ms, Some(40.0));
        assert_eq!(metrics.totals.mean_top_score, Some((0.9 + 0.55) / 2.0));
        assert_eq!(metrics.buckets.len(), 2);
        assert_eq!(metrics.buckets[0].figures.searches, 2);
        assert_eq!(metrics.buckets[1].figures.empty, 1);
        assert_eq!(metrics.buckets[0].precision, Some(1.0));
        assert_eq!(
            metrics.buckets[1].precision, None,
            "no feedback in the second hour"
        );
        assert_eq!(metrics.top_score_histogram.bins[9], 1);
        assert_eq!(metrics.top_score_histogram.bins[5], 1);
        assert_eq!(metrics.feedback.precision, Some(1.0));
        assert_eq!(metrics.recalled_memories.distinct, 2);
        assert_eq!(metrics.recalled_memories.superseded_or_corrected, 1);
        assert_eq!(metrics.empty_queries.len(), 1);
        assert_eq!(metrics.empty_queries[0].query.as_deref(), Some("unicorns"));
        assert_eq!(metrics.empty_queries[0].count, 2);
        assert_eq!(metrics.empty_queries[0].last_recall_id, events[3].id);
        assert_eq!(metrics.profiles.len(), 1);
        assert_eq!(metrics.profiles[0].precision, Some(1.0));
    }
}
