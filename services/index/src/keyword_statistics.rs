//! BM25 term statistics the embedded index keeps beside its shard: how many memories each
//! project, and each end-user in it, holds, and how many of those hold each term.
//!
//! Each memory is stored with its BM25 term weights as a sparse vector (term frequency,
//! saturated and length-normalised). A keyword query is then the query's terms weighted by
//! their inverse document frequency, and a memory's score is the dot product: BM25. The
//! index's posting lists answer it, so its cost follows the query's terms (how common they
//! are in the shard), with no pass over the project to gather statistics. The frequencies come from here, counted over the project's memories, or over the
//! end-user's when the query is an end-user's: one tenant's words never weigh in another's
//! ranking, and an end-user's scores say nothing of another end-user's memories.

use std::collections::HashMap;

/// The terms (hashed token ids) of one stored memory, and whose it is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DocumentTerms {
    pub project_id: String,
    pub user_id: Option<String>,
    /// Distinct term ids.
    pub terms: Vec<u32>,
}

/// How many documents a corpus holds, and how many of them hold each term.
#[derive(Clone, Debug, Default, PartialEq)]
struct TermCounts {
    documents: u64,
    documents_with_term: HashMap<u32, u64>,
}

impl TermCounts {
    fn add(&mut self, terms: &[u32]) {
        self.documents += 1;
        for term in terms {
            *self.documents_with_term.entry(*term).or_default() += 1;
        }
    }

    fn remove(&mut self, terms: &[u32]) {
        self.documents = self.documents.saturating_sub(1);
        for term in terms {
            self.forget(*term, 1);
        }
    }

    /// Take away a part of this corpus (an end-user's counts from the project's).
    fn subtract(&mut self, part: &TermCounts) {
        self.documents = self.documents.saturating_sub(part.documents);
        for (term, count) in &part.documents_with_term {
            self.forget(*term, *count);
        }
    }

    /// Entries that reach zero are dropped, so the counts never outgrow the stored memories.
    fn forget(&mut self, term: u32, count: u64) {
        if let Some(holding) = self.documents_with_term.get_mut(&term) {
            *holding = holding.saturating_sub(count);
            if *holding == 0 {
                self.documents_with_term.remove(&term);
            }
        }
    }

    /// BM25's inverse document frequency of each of `terms` held by at least one document,
    /// `ln(1 + (N - n + 0.5) / (n + 0.5))` (always positive).
    fn weights(&self, terms: &[u32]) -> Vec<(u32, f32)> {
        let documents = self.documents as f64;
        terms
            .iter()
            .filter_map(|term| {
                let holding = *self.documents_with_term.get(term)? as f64;
                let inverse_frequency = inverse_document_frequency(documents, holding);
                Some((*term, inverse_frequency as f32))
            })
            .collect()
    }
}

/// BM25's inverse document frequency of a term that `holding` of `documents` documents hold,
/// `ln(1 + (N - n + 0.5) / (n + 0.5))`; never below 0, even if counts were ever off (n > N).
pub(crate) fn inverse_document_frequency(documents: f64, holding: f64) -> f64 {
    (1.0 + (documents - holding + 0.5) / (holding + 0.5))
        .ln()
        .max(0.0)
}

#[derive(Clone, Debug, Default, PartialEq)]
struct ProjectTerms {
    whole: TermCounts,
    end_users: HashMap<String, TermCounts>,
}

/// The statistics of every project in one shard.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct KeywordStatistics {
    projects: HashMap<String, ProjectTerms>,
}

impl KeywordStatistics {
    pub fn add(&mut self, document: &DocumentTerms) {
        let project = self
            .projects
            .entry(document.project_id.clone())
            .or_default();
        project.whole.add(&document.terms);
        if let Some(user_id) = &document.user_id {
            project
                .end_users
                .entry(user_id.clone())
                .or_default()
                .add(&document.terms);
        }
    }

    pub fn remove(&mut self, document: &DocumentTerms) {
        let Some(project) = self.projects.get_mut(&document.project_id) else {
            return;
        };
        project.whole.remove(&document.terms);
        if let Some(user_id) = &document.user_id
            && let Some(end_user) = project.end_users.get_mut(user_id)
        {
            end_user.remove(&document.terms);
            if end_user.documents == 0 {
                project.end_users.remove(user_id);
            }
        }
        if project.whole.documents == 0 {
            self.projects.remove(&document.project_id);
        }
    }

    /// Forget every memory of one end-user (their points were deleted by filter, so their
    /// terms are not read one by one: the end-user's counts are exactly their share).
    pub fn remove_end_user(&mut self, project_id: &str, user_id: &str) {
        let Some(project) = self.projects.get_mut(project_id) else {
            return;
        };
        if let Some(end_user) = project.end_users.remove(user_id) {
            project.whole.subtract(&end_user);
        }
        if project.whole.documents == 0 {
            self.projects.remove(project_id);
        }
    }

    /// The query weights of `terms` in the project, or in one end-user's memories: only terms
    /// some memory of that corpus holds (the others cannot score).
    pub fn weights(
        &self,
        project_id: &str,
        user_id: Option<&str>,
        terms: &[u32],
    ) -> Vec<(u32, f32)> {
        let Some(project) = self.projects.get(project_id) else {
            return Vec::new();
        };
        let corpus = match user_id {
            None => &project.whole,
            Some(user_id) => match project.end_users.get(user_id) {
                Some(end_user) => end_user,
                None => return Vec::new(),
            },
        };
        corpus.weights(terms)
    }

    /// Distinct (corpus, term) counts held, for the log line at open.
    pub fn term_entries(&self) -> usize {
        self.projects
            .values()
            .map(|project| {
                project.whole.documents_with_term.len()
                    + project
                        .end_users
                        .values()
                        .map(|end_user| end_user.documents_with_term.len())
                        .sum::<usize>()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(project_id: &str, user_id: Option<&str>, terms: &[u32]) -> DocumentTerms {
        DocumentTerms {
            project_id: project_id.to_string(),
            user_id: user_id.map(str::to_string),
            terms: terms.to_vec(),
        }
    }

    #[test]
    fn a_rarer_term_weighs_more_and_an_absent_one_not_at_all() {
        let mut statistics = KeywordStatistics::default();
        statistics.add(&document("p", Some("ann"), &[1, 2]));
        statistics.add(&document("p", Some("bob"), &[1]));
        statistics.add(&document("p", None, &[1]));
        let weights: HashMap<u32, f32> = statistics
            .weights("p", None, &[1, 2, 3])
            .into_iter()
            .collect();
        assert_eq!(weights.len(), 2, "{weights:?}");
        assert!(weights[&2] > weights[&1], "{weights:?}");
        // N = 3, n = 1: ln(1 + 2.5 / 1.5).
        assert!((weights[&2] - (1.0f32 + 2.5 / 1.5).ln()).abs() < 1e-6);
        assert!(statistics.weights("other", None, &[1]).is_empty());
    }

    #[test]
    fn an_end_users_weights_count_only_their_memories() {
        let mut statistics = KeywordStatistics::default();
        statistics.add(&document("p", Some("ann"), &[1]));
        statistics.add(&document("p", Some("ann"), &[2]));
        for _ in 0..10 {
            statistics.add(&document("p", Some("bob"), &[1]));
        }
        let ann: HashMap<u32, f32> = statistics
            .weights("p", Some("ann"), &[1, 2])
            .into_iter()
            .collect();
        assert_eq!(
            ann[&1], ann[&2],
            "bob's memories must not make 1 common for ann: {ann:?}"
        );
        assert!(statistics.weights("p", Some("carol"), &[1]).is_empty());
    }

    #[test]
    fn removing_what_was_added_leaves_nothing_behind() {
        let mut statistics = KeywordStatistics::default();
        let kept = document("p", Some("ann"), &[1, 2]);
        statistics.add(&kept);
        let before = statistics.clone();
        let removed = [
            document("p", Some("ann"), &[2, 3]),
            document("p", None, &[4]),
            document("q", Some("ann"), &[1]),
        ];
        for each in &removed {
            statistics.add(each);
        }
        for each in &removed {
            statistics.remove(each);
        }
        assert_eq!(statistics, before);

        statistics.add(&document("p", Some("bob"), &[1, 5]));
        statistics.add(&document("p", Some("bob"), &[5]));
        statistics.remove_end_user("p", "bob");
        assert_eq!(statistics, before);
        statistics.remove(&kept);
        assert_eq!(statistics, KeywordStatistics::default());
        assert_eq!(statistics.term_entries(), 0);
    }
}
