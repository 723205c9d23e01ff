//! The kinds of thing a lookup can miss, each with the stable `code` its problem carries
//! (`memory-not-found`, `file-not-found`, …). Storage, engine and every door name the same one.

text_enum!(
    /// What a lookup did not find, in this project (and, for an end-user token, for that
    /// end-user). The name never carries an id, so no answer reveals another tenant's ids.
    NotFoundKind {
        Memory => "memory",
        Recall => "recall",
        File => "file",
        SessionState => "session state",
        ApiKey => "api key",
        Task => "task",
        EvaluationSet => "evaluation set",
        EvaluationRun => "evaluation run",
        Run => "run",
        RetrievalProfile => "retrieval profile",
        Member => "member",
        Invitation => "invitation",
        Project => "project",
        Organization => "organization",
        Subject => "subject",
        Price => "price",
        Statement => "statement",
    }
);

impl NotFoundKind {
    /// The stable problem code: the noun in kebab case, then `-not-found`.
    pub fn code(&self) -> &'static str {
        match self {
            NotFoundKind::Memory => "memory-not-found",
            NotFoundKind::Recall => "recall-not-found",
            NotFoundKind::File => "file-not-found",
            NotFoundKind::SessionState => "session-state-not-found",
            NotFoundKind::ApiKey => "api-key-not-found",
            NotFoundKind::Task => "task-not-found",
            NotFoundKind::EvaluationSet => "evaluation-set-not-found",
            NotFoundKind::EvaluationRun => "evaluation-run-not-found",
            NotFoundKind::Run => "run-not-found",
            NotFoundKind::RetrievalProfile => "retrieval-profile-not-found",
            NotFoundKind::Member => "member-not-found",
            NotFoundKind::Invitation => "invitation-not-found",
            NotFoundKind::Project => "project-not-found",
            NotFoundKind::Organization => "organization-not-found",
            NotFoundKind::Subject => "subject-not-found",
            NotFoundKind::Price => "price-not-found",
            NotFoundKind::Statement => "statement-not-found",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::NotFoundKind;

    #[test]
    fn every_code_is_the_noun_in_kebab_case() {
        for kind in NotFoundKind::ALL {
            let expected = format!("{}-not-found", kind.as_str().replace(' ', "-"));
            assert_eq!(kind.code(), expected);
        }
    }
}
