//! The console's two languages: which one a page speaks, the Chinese of every English text
//! the console shows, and dates, numbers and amounts written the way each language writes them.

mod chinese;

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt::Display;
use std::sync::LazyLock;

/// A language the console speaks. English is the source: every text is written in English
/// in the code and looked up in [`chinese::TEXTS`] for a page in Chinese.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Language {
    #[default]
    English,
    Chinese,
}

impl Language {
    /// The tag the account setting stores and the top bar's switch sends (`en`, `zh`).
    pub fn tag(self) -> &'static str {
        match self {
            Language::English => "en",
            Language::Chinese => "zh",
        }
    }

    /// The page's `<html lang>`: simplified Chinese, so browsers pick the right CJK glyphs.
    pub fn html_lang(self) -> &'static str {
        match self {
            Language::English => "en",
            Language::Chinese => "zh-CN",
        }
    }

    /// The language's own name, as the switch offers it.
    pub fn own_name(self) -> &'static str {
        match self {
            Language::English => "English",
            Language::Chinese => "中文",
        }
    }

    /// A language tag (`zh`, `zh-CN`, `zh-Hans-CN`, `en-GB`, …): the language it names,
    /// when the console speaks it.
    pub fn from_tag(tag: &str) -> Option<Language> {
        let primary = tag.trim().split(['-', '_']).next().unwrap_or("");
        if primary.eq_ignore_ascii_case("zh") {
            Some(Language::Chinese)
        } else if primary.eq_ignore_ascii_case("en") {
            Some(Language::English)
        } else {
            None
        }
    }

    /// The language a browser's `Accept-Language` prefers most among the console's (by
    /// `q`, then order); English when it names neither.
    pub fn from_accept_language(header: &str) -> Language {
        let mut best: Option<(f32, Language)> = None;
        for entry in header.split(',') {
            let mut parts = entry.split(';');
            let Some(language) = parts.next().and_then(Language::from_tag) else {
                continue;
            };
            let weight = parts
                .filter_map(|parameter| parameter.trim().strip_prefix("q="))
                .find_map(|value| value.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            if weight > 0.0 && best.is_none_or(|(best_weight, _)| weight > best_weight) {
                best = Some((weight, language));
            }
        }
        best.map(|(_, language)| language).unwrap_or_default()
    }

    /// The language of the page being rendered: provided by the root component (from the
    /// account's setting or the browser's `Accept-Language` on the server, and from the
    /// page's `<html lang>` in the browser).
    pub fn current() -> Language {
        leptos::prelude::use_context::<Language>().unwrap_or_else(hydrated_language)
    }

    /// `english` in this language.
    pub fn text(self, english: &'static str) -> &'static str {
        match self {
            Language::English => english,
            Language::Chinese => CHINESE.get(english).copied().unwrap_or(english),
        }
    }
}

/// Outside a component (an event handler run later), the browser's page language; the
/// server always renders inside the root component, which provides it.
pub(crate) fn hydrated_language() -> Language {
    #[cfg(feature = "hydrate")]
    {
        use leptos::prelude::document;
        if let Some(lang) = document()
            .document_element()
            .and_then(|root| root.get_attribute("lang"))
        {
            return Language::from_tag(&lang).unwrap_or_default();
        }
    }
    Language::English
}

/// Once `succeeded()` turns true, loads `href` (none: this page again) as a whole page
/// rather than through the router, so it comes in the language the server settles on for
/// the account (after signing in, joining, or choosing another language).
pub fn load_whole_page_when(succeeded: impl Fn() -> bool + 'static, href: Option<&'static str>) {
    leptos::prelude::Effect::new(move |_| {
        if succeeded() {
            #[cfg(feature = "hydrate")]
            {
                let location = leptos::prelude::window().location();
                let _ = match href {
                    Some(href) => location.set_href(href),
                    None => location.reload(),
                };
            }
            #[cfg(not(feature = "hydrate"))]
            let _ = href;
        }
    });
}

static CHINESE: LazyLock<HashMap<&'static str, &'static str>> =
    LazyLock::new(|| chinese::TEXTS.iter().copied().collect());

/// `english` in the language of the page being rendered.
pub fn tr(english: &'static str) -> &'static str {
    Language::current().text(english)
}

/// `template` (English, with `{}` holes) in the page's language, its holes filled with
/// `values` in order. A translation may take them in another order with `{0}`, `{1}`, ….
pub fn trf(template: &'static str, values: &[&dyn Display]) -> String {
    fill(Language::current().text(template), values)
}

fn fill(template: &str, values: &[&dyn Display]) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut next = 0;
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let inside = &after[..close];
        let index = if inside.is_empty() {
            next += 1;
            Some(next - 1)
        } else {
            inside.parse::<usize>().ok()
        };
        match index.and_then(|index| values.get(index)) {
            Some(value) => out.push_str(&value.to_string()),
            // Not a hole (a brace in the text): kept as written.
            None => out.push_str(&rest[open..open + close + 2]),
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The API's vocabulary the console shows as it is in English (memory kinds, states and
/// sources, key, task and run states, roles, audit outcomes, recall buckets, retrieval modes
/// and search stages, the stores of the registry of subject data): each has its Chinese.
const VOCABULARY: &[&str] = &[
    "semantic",
    "episodic",
    "procedural",
    "preference",
    "trajectory",
    "active",
    "superseded",
    "deleted",
    "expired",
    "revoked",
    "open",
    "ended",
    "user_stated",
    "tool_result",
    "model_inferred",
    "manual",
    "file",
    "queued",
    "running",
    "succeeded",
    "failed",
    "cancelled",
    "done",
    "pending",
    "live",
    "test",
    "owner",
    "admin",
    "compliance",
    "analyst",
    "developer",
    "success",
    "hour",
    "hybrid",
    "dense",
    "keyword",
    "embed",
    "hydrate",
    "rank",
    "day",
    "off",
    "mask",
    "reject",
    "created",
    "updated",
    "corrected",
    "merged",
    "consolidated",
    "injected",
    "recalled",
    "search",
    "context",
    "failure",
    "denied",
    "memories",
    "history",
    "messages",
    "session_state",
    "files",
    "feedback",
    "recall_events",
    "runs",
    "evaluation_cases",
    "evaluation_runs",
    "task_results",
    "idempotency",
    "index",
    "usage",
    "query_cache",
];

/// A value of the API's vocabulary as the page's language names it; a value it does not
/// know (a name, an id) is shown as it is.
pub fn term(value: &str) -> String {
    match VOCABULARY.iter().find(|word| **word == value) {
        Some(word) => Language::current().text(word).to_string(),
        None => value.to_string(),
    }
}

/// A cost breakdown's entry as the page's language names it: the server's words for calls
/// that named no one (`none named`), calls from before channels were recorded and erased
/// end-users (`erased <digest>`); anything else is a name or id, shown as it is.
pub fn breakdown_label(label: &str) -> String {
    match label {
        "none named" => tr("none named").to_string(),
        "before channels were recorded" => tr("before channels were recorded").to_string(),
        _ => match label.strip_prefix("erased ") {
            Some(digest) => trf("erased {}", &[&digest]),
            None => label.to_string(),
        },
    }
}

/// Whether a breakdown entry names someone (a name or id, never translated) rather than
/// being the server's words for no one.
pub fn names_someone(label: &str) -> bool {
    breakdown_label(label) == label
}

/// A metered unit (`tokens_embedded`, …) as the page's language names it: `tokens embedded`.
pub fn unit_label(unit: &str) -> String {
    let known = match unit {
        "memories_written" => tr("memories written"),
        "searches" => tr("searches"),
        "tokens_embedded" => tr("tokens embedded"),
        "memory_days" => tr("memory days"),
        "file_bytes" => tr("file bytes"),
        "llm_tokens_in" => tr("llm tokens in"),
        "llm_tokens_out" => tr("llm tokens out"),
        "memories_evicted" => tr("memories evicted"),
        other => return other.replace('_', " "),
    };
    known.to_string()
}

/// An RFC 3339 (or `YYYY-MM-DD HH:MM[:SS] UTC`) time as the page's language writes it:
/// English as the server sent it, Chinese `2026年12月5日 11:49:31 (UTC)`. Anything that does
/// not parse is shown as it came.
pub fn format_time(timestamp: &str) -> String {
    if Language::current() == Language::English {
        return timestamp.to_string();
    }
    match split_timestamp(timestamp) {
        Some((date, time)) => format!("{} {time} (UTC)", chinese_date(date)),
        None => timestamp.to_string(),
    }
}

/// Like [`format_time`] without the zone, for tables whose header already says UTC.
pub fn format_time_short(timestamp: &str) -> String {
    if Language::current() == Language::English {
        return timestamp.to_string();
    }
    match split_timestamp(timestamp) {
        Some((date, time)) => format!("{} {time}", chinese_date(date)),
        None => timestamp.to_string(),
    }
}

/// A day, `YYYY-MM-DD`, as the page's language writes it (`2026年12月5日`).
pub fn format_day(day: &str) -> String {
    match Language::current() {
        Language::English => day.to_string(),
        Language::Chinese => chinese_date(day),
    }
}

/// A month, `YYYY-MM`, as the page's language writes it (`2026年12月`).
pub fn format_month(month: &str) -> String {
    match (Language::current(), month.split_once('-')) {
        (Language::Chinese, Some((year, number))) if number.parse::<u32>().is_ok() => {
            format!("{year}年{}月", number.trim_start_matches('0'))
        }
        _ => month.to_string(),
    }
}

/// `2026-12-05T11:49:31.123Z` → (`2026-12-05`, `11:49:31`).
fn split_timestamp(timestamp: &str) -> Option<(&str, &str)> {
    let timestamp = timestamp.trim().trim_end_matches(" UTC");
    let (date, rest) = timestamp.split_once(['T', ' '])?;
    if date.len() != 10 || rest.len() < 5 {
        return None;
    }
    let seconds_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ':'))
        .unwrap_or(rest.len());
    Some((date, &rest[..seconds_end.min(8)]))
}

fn chinese_date(day: &str) -> String {
    let mut parts = day.splitn(3, '-');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(year), Some(month), Some(day))
            if month.parse::<u32>().is_ok() && day.parse::<u32>().is_ok() =>
        {
            format!(
                "{year}年{}月{}日",
                month.trim_start_matches('0'),
                day.trim_start_matches('0')
            )
        }
        _ => day.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_browser_language_is_read_by_preference() {
        assert_eq!(
            Language::from_accept_language("zh-CN,zh;q=0.9,en;q=0.8"),
            Language::Chinese
        );
        assert_eq!(
            Language::from_accept_language("en-GB,zh;q=0.5"),
            Language::English
        );
        assert_eq!(
            Language::from_accept_language("fr-FR,zh-TW;q=0.7,en;q=0.3"),
            Language::Chinese
        );
        assert_eq!(Language::from_accept_language("de"), Language::English);
        assert_eq!(
            Language::from_accept_language("zh;q=0,en"),
            Language::English
        );
    }

    #[test]
    fn holes_are_filled_in_order_or_by_number() {
        assert_eq!(fill("{} of {}", &[&1, &2]), "1 of 2");
        assert_eq!(
            fill("共 {1} 条中的第 {0} 条", &[&1, &2]),
            "共 2 条中的第 1 条"
        );
        assert_eq!(fill("a {brace} stays", &[&1]), "a {brace} stays");
    }

    #[test]
    fn every_text_the_console_shows_has_its_chinese() {
        // Every `tr("…")` and `trf("…", …)` in the console's sources, read from the files:
        // a text added without its Chinese fails here, before a browser sees it.
        let source_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut missing = Vec::new();
        let mut seen = 0;
        let mut files = vec![source_dir.clone()];
        while let Some(path) = files.pop() {
            if path.is_dir() {
                for entry in std::fs::read_dir(&path).expect("console sources are readable") {
                    files.push(entry.expect("a directory entry").path());
                }
                continue;
            }
            if path.extension().is_none_or(|extension| extension != "rs")
                || path.ends_with("i18n/chinese.rs")
            {
                continue;
            }
            let source = std::fs::read_to_string(&path).expect("a console source is readable");
            // What the console shows: the code before its tests, without comments.
            let shown: String = source
                .split("#[cfg(test)]")
                .next()
                .unwrap_or_default()
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            for english in texts_in(&shown) {
                seen += 1;
                if !CHINESE.contains_key(english.as_str()) {
                    missing.push(format!("{}: {english:?}", path.display()));
                }
            }
        }
        assert!(seen > 500, "the scan found the console's texts ({seen})");
        assert!(
            missing.is_empty(),
            "texts without Chinese:\n{}",
            missing.join("\n")
        );
        let blank: Vec<&str> = chinese::TEXTS
            .iter()
            .filter(|(english, chinese)| english.is_empty() || chinese.trim().is_empty())
            .map(|(english, _)| *english)
            .collect();
        assert!(blank.is_empty(), "texts with a blank side: {blank:?}");
    }

    #[test]
    fn a_failure_is_said_in_chinese_by_its_engine_code() {
        use crate::model::ConsoleError;
        let held = ConsoleError::refused(
            "legal-hold",
            "2 memories of this end-user are under legal hold: m1, m2".to_string(),
        );
        assert_eq!(held.code(), "legal-hold");
        assert_eq!(
            held.localized(),
            "2 memories of this end-user are under legal hold: m1, m2",
            "English says it as the engine did"
        );
        let owner = leptos::prelude::Owner::new();
        owner.with(|| {
            leptos::prelude::provide_context(Language::Chinese);
            assert_eq!(
                held.localized(),
                "该终端用户的记忆处于法律保留中：2 memories of this end-user are under legal hold: m1, m2"
            );
            assert_eq!(ConsoleError::NotFound.localized(), "未找到");
            assert_eq!(
                ConsoleError::Forbidden {
                    role: "analyst".to_string()
                }
                .localized(),
                "你的角色（分析师）无权查看此内容"
            );
            assert_eq!(
                ConsoleError::InvalidInput("k: a whole number, such as 10".to_string()).code(),
                "validation-failed"
            );
            assert_eq!(crate::charts::money(12_340_000, "USD"), "US$12.34");
            assert_eq!(format_day("2026-12-05"), "2026年12月5日");
        });
    }

    #[test]
    fn every_page_of_the_navigation_and_every_word_of_the_vocabulary_has_its_chinese() {
        for word in VOCABULARY {
            assert!(CHINESE.contains_key(word), "{word} has no Chinese");
        }
        for page in crate::topbar::PAGES {
            assert!(
                CHINESE.contains_key(page.label),
                "{} has no Chinese name",
                page.label
            );
        }
    }

    #[test]
    fn times_days_and_months_are_written_the_chinese_way() {
        assert_eq!(chinese_date("2026-12-05"), "2026年12月5日");
        assert_eq!(
            split_timestamp("2026-12-05T11:49:31.123Z"),
            Some(("2026-12-05", "11:49:31"))
        );
        assert_eq!(
            split_timestamp("2026-12-04 15:20 UTC"),
            Some(("2026-12-04", "15:20"))
        );
        assert_eq!(split_timestamp("yesterday"), None);
    }

    /// The string literals passed to `tr(` / `trf(` in `source` (escapes `\"`
    /// and `\\` undone, as the compiler reads them).
    fn texts_in(source: &str) -> Vec<String> {
        let mut found = Vec::new();
        for call in ["tr(", "trf("] {
            let mut rest = source;
            while let Some(at) = rest.find(call) {
                let is_call = !rest[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_');
                rest = rest[at + call.len()..].trim_start();
                let Some(literal) = rest.strip_prefix('"') else {
                    continue;
                };
                let mut text = String::new();
                let mut chars = literal.char_indices();
                let mut end = literal.len();
                while let Some((index, c)) = chars.next() {
                    match c {
                        '\\' => match chars.next() {
                            Some((_, 'n')) => text.push('\n'),
                            // A line continuation: the newline and the indent go.
                            Some((_, '\n')) => {
                                while chars.clone().next().is_some_and(|(_, c)| c.is_whitespace()) {
                                    chars.next();
                                }
                            }
                            Some((_, escaped)) => text.push(escaped),
                            None => break,
                        },
                        '"' => {
                            end = index;
                            break;
                        }
                        c => text.push(c),
                    }
                }
                if is_call {
                    found.push(text);
                }
                rest = &literal[end.min(literal.len())..];
            }
        }
        found
    }
}
