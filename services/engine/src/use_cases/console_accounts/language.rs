//! The language the console speaks to a member: each member chooses their own (any role may),
//! and no one chooses for another.

use super::{ConsoleAccess, ConsoleMember};
use crate::EngineError;
use engram_core::{ConsoleLanguage, InvalidInput};

impl ConsoleMember {
    /// The language the member chose; none: the console follows their browser.
    pub fn language(&self) -> Option<ConsoleLanguage> {
        self.account.language
    }
}

impl ConsoleAccess {
    /// Speak `language` (`en` or `zh`; empty: follow the browser) to the member from now on.
    pub async fn choose_console_language(
        &self,
        member: &ConsoleMember,
        language: &str,
    ) -> Result<Option<ConsoleLanguage>, EngineError> {
        let language = match language.trim() {
            "" => None,
            tag => Some(ConsoleLanguage::parse(tag).ok_or_else(|| {
                let shown: String = tag.chars().take(16).collect();
                InvalidInput::single(
                    "language",
                    format!("{shown:?} is not a language of the console: `en` or `zh`"),
                )
            })?),
        };
        self.storage
            .set_console_account_language(member.organization_id(), member.account_id(), language)
            .await?;
        Ok(language)
    }
}
