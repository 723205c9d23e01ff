//! Retrieval profiles: named search tunings, some serving a share of the searches that
//! name none (the shares of a project never pass 1).

use crate::profiles::{DEFAULT_PROFILE, SearchTuning};
use crate::{EngineError, MemoryEngine};
use engram_core::NotFoundKind;
use engram_core::{FieldError, InvalidInput, Operation, Principal};
use engram_storage::recall_quality::RetrievalProfileRecord;

/// A profile as the caller sent it.
#[derive(Clone, Debug)]
pub struct PutRetrievalProfileRequest {
    pub name: String,
    /// `{"retrieval": "dense", "keyword_weight": 0.3, …}`
    pub parameters: serde_json::Value,
    /// 0–1; default 0.
    pub traffic_share: Option<f64>,
}

fn check_profile_name(name: &str) -> Result<(), EngineError> {
    let valid = (1..=64).contains(&name.len())
        && name.chars().all(|character| {
            character.is_ascii_alphanumeric() || matches!(character, '-' | '_' | '.')
        })
        && name != DEFAULT_PROFILE;
    if valid {
        return Ok(());
    }
    Err(InvalidInput(vec![FieldError::new(
        "name",
        "1–64 letters, digits, '-', '_' or '.', and not \"default\"",
    )])
    .into())
}

impl MemoryEngine {
    pub async fn list_retrieval_profiles_for(
        &self,
        principal: &Principal,
    ) -> Result<Vec<RetrievalProfileRecord>, EngineError> {
        principal.authorize(Operation::ListRetrievalProfiles)?;
        Ok(self.storage.retrieval_profiles(principal.scope()).await?)
    }

    pub async fn get_retrieval_profile_for(
        &self,
        principal: &Principal,
        name: &str,
    ) -> Result<RetrievalProfileRecord, EngineError> {
        principal.authorize(Operation::GetRetrievalProfile)?;
        self.storage
            .retrieval_profile(principal.scope(), name)
            .await?
            .ok_or(EngineError::NotFound(NotFoundKind::RetrievalProfile))
    }

    pub async fn put_retrieval_profile_for(
        &self,
        principal: &Principal,
        request: PutRetrievalProfileRequest,
    ) -> Result<RetrievalProfileRecord, EngineError> {
        principal.authorize(Operation::PutRetrievalProfile)?;
        check_profile_name(&request.name)?;
        let mut errors = Vec::new();
        let tuning =
            SearchTuning::parse(&request.parameters, "parameters").unwrap_or_else(|found| {
                errors.extend(found);
                SearchTuning::default()
            });
        let share = request.traffic_share.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&share) {
            errors.push(FieldError::new("traffic_share", "must be between 0 and 1"));
        }
        if !errors.is_empty() {
            return Err(InvalidInput(errors).into());
        }
        let saved = self
            .storage
            .put_retrieval_profile(principal.scope(), &request.name, tuning.to_json(), share)
            .await;
        // Even when reading the saved profile back failed, it may have been written.
        self.forget_project_settings(principal.scope().project_id());
        saved.map_err(crate::use_cases::conflict_on_refusal)
    }

    pub async fn delete_retrieval_profile_for(
        &self,
        principal: &Principal,
        name: &str,
    ) -> Result<(), EngineError> {
        principal.authorize(Operation::DeleteRetrievalProfile)?;
        let deleted = self
            .storage
            .delete_retrieval_profile(principal.scope(), name)
            .await
            .map_err(crate::use_cases::conflict_on_refusal)?;
        self.forget_project_settings(principal.scope().project_id());
        if deleted {
            Ok(())
        } else {
            Err(EngineError::NotFound(NotFoundKind::RetrievalProfile))
        }
    }
}
