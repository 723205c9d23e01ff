//! Names in a question — a person, a place, a product: words written with a capital letter
//! inside a sentence — and whether a memory's text mentions them, word for word.
//! A search raises its relevance floor when no memory within reach mentions any (see
//! [`crate::search::MeasuredFloors`]): a question about Caroline asked of someone whose
//! memories never name her is about someone these memories do not know.

/// Capitalised words that name a time or the speaker, not someone or something a memory
/// would mention: a question "what did I do in May?" or "in Sept" is read for time
/// ([`crate::query_time`]), not for a name.
const NOT_NAMES: &[&str] = &[
    "i",
    "ok",
    "okay",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "spring",
    "summer",
    "autumn",
    "fall",
    "winter",
];

/// The names `query` mentions, lowercased, each once, in order, split into words as
/// [`mentions_any`] reads a memory ("Melanie's" → `melanie`).
/// A word counts when it starts with a capital letter and does not start a sentence. A query
/// written mostly in capitals (a title, shouting) names nothing: its capitals say nothing.
pub fn names_in_query(query: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut capitalised = 0;
    let mut words_inside_sentences = 0;
    let mut starts_sentence = true;
    for raw in query.split_whitespace() {
        let word = raw.trim_matches(|character: char| !character.is_alphanumeric());
        let opens_sentence = starts_sentence;
        starts_sentence = raw.ends_with(['.', '?', '!', ':', ';']);
        let Some(first) = word.chars().next() else {
            continue;
        };
        if opens_sentence {
            continue;
        }
        words_inside_sentences += 1;
        if !first.is_uppercase() || NOT_NAMES.contains(&word.to_lowercase().as_str()) {
            continue;
        }
        capitalised += 1;
        // "Melanie's" names melanie, "OPS-4471" names ops and 4471: memories are matched
        // word by word.
        for part in word
            .to_lowercase()
            .split(|character: char| !character.is_alphanumeric())
        {
            if part.chars().count() < 2 || NOT_NAMES.contains(&part) {
                continue;
            }
            if !names.iter().any(|name| name == part) {
                names.push(part.to_string());
            }
        }
    }
    // Short questions are often half names ("Who is Caroline Smith?"): only longer ones
    // are judged for it.
    if words_inside_sentences >= 4 && capitalised * 2 > words_inside_sentences {
        return Vec::new();
    }
    names
}

/// Whether `text` mentions one of `names` (from [`names_in_query`]) as a whole word, in any
/// case: "Caroline's" mentions "caroline", "Carolina" does not.
pub fn mentions_any(text: &str, names: &[String]) -> bool {
    if names.is_empty() {
        return false;
    }
    let lowered = text.to_lowercase();
    lowered
        .split(|character: char| !character.is_alphanumeric())
        .any(|word| names.iter().any(|name| name == word))
}

/// Whether `text` is written (in part) in a script whose words cannot be matched against a
/// name in Latin letters — Chinese, Japanese, Korean: "李伟" may well be the "Li Wei" asked
/// about.
pub fn written_without_latin_names(text: &str) -> bool {
    text.chars().any(|character| {
        matches!(character,
            '\u{3040}'..='\u{30ff}'   // hiragana, katakana
            | '\u{3400}'..='\u{4dbf}' // CJK extension A
            | '\u{4e00}'..='\u{9fff}' // CJK unified ideographs
            | '\u{ac00}'..='\u{d7af}' // hangul syllables
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_capitalised_words_inside_a_sentence() {
        assert_eq!(
            names_in_query("When did Caroline go to the LGBTQ support group?"),
            vec!["caroline", "lgbtq"]
        );
        assert_eq!(
            names_in_query("What is Melanie's favourite book? Did Melanie read it?"),
            vec!["melanie"]
        );
        assert_eq!(names_in_query("Where does Li Wei live?"), vec!["li", "wei"]);
        assert_eq!(
            names_in_query("what about ticket OPS-4471?"),
            vec!["ops", "4471"]
        );
        assert!(mentions_any(
            "Ticket ops-4471 is closed.",
            &names_in_query("see OPS-4471")
        ));
    }

    #[test]
    fn sentence_starts_times_and_the_speaker_are_not_names() {
        assert!(names_in_query("Where does the user work?").is_empty());
        assert!(names_in_query("Caroline").is_empty());
        assert!(names_in_query("what did I do in May 2023?").is_empty());
        assert!(names_in_query("What did I do in Sept? And last Summer?").is_empty());
        assert_eq!(names_in_query("Did I meet Tom?"), vec!["tom"]);
        assert_eq!(
            names_in_query("Who is Caroline Smith?"),
            vec!["caroline", "smith"]
        );
        assert!(names_in_query("Which cafe did she like on Monday? Tea").is_empty());
        assert!(names_in_query("unicorn dragons").is_empty());
        assert!(names_in_query("用户喜欢喝什么？").is_empty());
    }

    #[test]
    fn a_query_mostly_in_capitals_names_nothing() {
        assert!(names_in_query("Where Does The User Work").is_empty());
        assert!(names_in_query("WHAT DOES CAROLINE LIKE TO EAT").is_empty());
        assert_eq!(
            names_in_query("what does the user think of Rust and Go?"),
            vec!["rust", "go"]
        );
    }

    #[test]
    fn a_mention_is_a_whole_word_in_any_case() {
        let names = vec!["caroline".to_string()];
        assert!(mentions_any("Caroline: I went to a support group.", &names));
        assert!(mentions_any("I met CAROLINE's sister.", &names));
        assert!(!mentions_any("We drove through North Carolina.", &names));
        assert!(!mentions_any("anything", &[]));
    }

    #[test]
    fn cjk_text_cannot_be_matched_against_latin_names() {
        assert!(written_without_latin_names("李伟住在上海。"));
        assert!(written_without_latin_names("東京に住んでいる"));
        assert!(!written_without_latin_names("Li Wei lives in Shanghai."));
    }
}
