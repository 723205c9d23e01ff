//! One recorded search as the recall-quality page inspects it: its figures, what became of
//! each recalled memory since, and — only for a caller who may read memory content — the
//! query text and the recalled contents, logged as viewed before they are handed out.

use crate::{EngineError, MemoryEngine};
use engram_core::{MemoryId, Operation, Principal};
use engram_storage::recall_quality::{MemoryFate, RecallEventRecord};
use std::collections::HashMap;

#[derive(Clone, Debug)]
pub struct RecallInspection {
    /// The event; its `query_text` is `None` unless `shows_content`.
    pub event: RecallEventRecord,
    /// Each recalled memory that still exists, with its state now.
    pub fates: HashMap<MemoryId, MemoryFate>,
    /// The content of each recalled memory that still exists, when `shows_content`.
    pub contents: HashMap<MemoryId, String>,
    pub shows_content: bool,
}

impl MemoryEngine {
    pub async fn inspect_recall_event_for(
        &self,
        principal: &Principal,
        recall_id: uuid::Uuid,
    ) -> Result<RecallInspection, EngineError> {
        principal.authorize(Operation::InspectRecallEvent)?;
        let mut event = self.visible_recall_event(principal, recall_id).await?;
        let ids = crate::recall_metrics::recalled_ids(&event);
        let fates = self.storage.memory_fates(principal.scope(), &ids).await?;
        let shows_content = !principal.answers_without_content(Operation::InspectRecallEvent);
        let mut contents = HashMap::new();
        if shows_content {
            for id in ids.iter().filter(|id| fates.contains_key(id)) {
                if let Ok(memory) = self.visible_memory(principal, *id).await {
                    contents.insert(*id, memory.content);
                }
            }
            let mut shown = vec![event.id.to_string()];
            shown.extend(contents.keys().map(ToString::to_string));
            self.record_content_view_for(principal, shown, "recall-event")
                .await?;
        } else {
            event.query_text = None;
            // Metadata filter values are the searcher's words too.
            if let Some(filters) = event.filters.as_object_mut() {
                filters.remove("metadata");
            }
        }
        Ok(RecallInspection {
            event,
            fates,
            contents,
            shows_content,
        })
    }
}
