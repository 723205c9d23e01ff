//! Time named in a question — "yesterday", "last month", "in May 2023", "上个月", "去年夏天" —
//! read against a reference time into the window of event time (`occurred_at`) it names.
//! Weeks start on Monday; seasons are the northern meteorological ones (winter: Dec–Feb).

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};

/// The window of event time a question names, `[from, to)`, and the words that named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeInQuery {
    pub phrase: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

const MONTHS: [(&str, u32); 21] = [
    ("january", 1),
    ("february", 2),
    ("march", 3),
    ("april", 4),
    ("may", 5),
    ("june", 6),
    ("july", 7),
    ("august", 8),
    ("september", 9),
    ("october", 10),
    ("november", 11),
    ("december", 12),
    ("jan", 1),
    ("feb", 2),
    ("mar", 3),
    ("apr", 4),
    ("jun", 6),
    ("jul", 7),
    ("aug", 8),
    ("sept", 9),
    ("sep", 9),
];
const MORE_MONTHS: [(&str, u32); 3] = [("oct", 10), ("nov", 11), ("dec", 12)];

/// The first window of event time `query` names, read against `now`; `None` when it names
/// none.
pub fn time_in_query(query: &str, now: DateTime<Utc>) -> Option<TimeInQuery> {
    let lowered = query.to_lowercase();
    let words: Vec<&str> = lowered
        .split(|character: char| !character.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .collect();
    english(&words, now).or_else(|| chinese(query, now))
}

fn english(words: &[&str], now: DateTime<Utc>) -> Option<TimeInQuery> {
    let today = now.date_naive();
    let found = |phrase: String, (from, to): (NaiveDate, NaiveDate)| {
        Some(TimeInQuery {
            phrase,
            from: midnight(from),
            to: midnight(to),
        })
    };
    for (position, word) in words.iter().enumerate() {
        let next = words.get(position + 1).copied();
        let after_next = words.get(position + 2).copied();
        match (*word, next) {
            ("yesterday", _) => return found("yesterday".into(), day(today, -1)),
            ("today", _) => return found("today".into(), day(today, 0)),
            ("last" | "this", Some(unit @ ("week" | "month" | "year"))) => {
                let back = i32::from(*word == "last");
                return found(format!("{word} {unit}"), unit_window(today, unit, back)?);
            }
            ("last" | "this", Some(season)) if season_months(season).is_some() => {
                let window = season_window(today, season, *word == "last")?;
                return found(format!("{word} {season}"), window);
            }
            _ => {}
        }
        // "3 days ago", "two months ago"
        if let (Some(count), Some(unit), Some("ago")) = (number(word), next, after_next) {
            let unit = unit.trim_end_matches('s');
            if matches!(unit, "day" | "week" | "month" | "year") {
                let phrase = format!("{word} {} ago", next.unwrap_or(unit));
                return found(phrase, unit_window(today, unit, count)?);
            }
        }
        // "may 2023", "in may", "in 2023"
        if let Some(month) = month_number(word) {
            let year = next.and_then(year_number);
            let after_in = position > 0 && words[position - 1] == "in";
            if let Some(year) = year {
                return found(format!("{word} {year}"), month_window(year, month)?);
            }
            if after_in {
                let year = if month <= today.month() {
                    today.year()
                } else {
                    today.year() - 1
                };
                return found(format!("in {word}"), month_window(year, month)?);
            }
        }
        if *word == "in"
            && let Some(year) = next.and_then(year_number)
        {
            return found(format!("in {year}"), year_window(year)?);
        }
    }
    None
}

fn chinese(query: &str, now: DateTime<Utc>) -> Option<TimeInQuery> {
    let today = now.date_naive();
    let found = |phrase: &str, (from, to): (NaiveDate, NaiveDate)| {
        Some(TimeInQuery {
            phrase: phrase.to_string(),
            from: midnight(from),
            to: midnight(to),
        })
    };
    // A season of a year first: "去年夏天" is summer, not the whole year.
    for (year_word, years_back) in [("前年", 2), ("去年", 1), ("今年", 0)] {
        for (season_word, season) in [
            ("春天", "spring"),
            ("夏天", "summer"),
            ("秋天", "autumn"),
            ("冬天", "winter"),
        ] {
            let phrase = format!("{year_word}{season_word}");
            if query.contains(&phrase) {
                let (first, _) = season_months(season)?;
                let year = today.year() - years_back;
                let from = NaiveDate::from_ymd_opt(year, first, 1)?;
                return found(&phrase, (from, add_months(from, 3)?));
            }
        }
    }
    // "2023年5月", "5月", "2023年"
    if let Some((phrase, year, month)) = year_month(query) {
        return match (year, month) {
            (Some(year), Some(month)) => found(&phrase, month_window(year, month)?),
            (None, Some(month)) => {
                let year = if month <= today.month() {
                    today.year()
                } else {
                    today.year() - 1
                };
                found(&phrase, month_window(year, month)?)
            }
            (Some(year), None) => found(&phrase, year_window(year)?),
            (None, None) => None,
        };
    }
    let fixed: [(&str, &str, i32); 15] = [
        ("前天", "day", 2),
        ("昨天", "day", 1),
        ("今天", "day", 0),
        ("上个星期", "week", 1),
        ("上星期", "week", 1),
        ("上个礼拜", "week", 1),
        ("上周", "week", 1),
        ("这个星期", "week", 0),
        ("这周", "week", 0),
        ("本周", "week", 0),
        ("上个月", "month", 1),
        ("上月", "month", 1),
        ("这个月", "month", 0),
        ("本月", "month", 0),
        ("前年", "year", 2),
    ];
    for (phrase, unit, back) in fixed {
        if query.contains(phrase) {
            return found(phrase, unit_window(today, unit, back)?);
        }
    }
    for (phrase, back) in [("去年", 1), ("今年", 0)] {
        if query.contains(phrase) {
            return found(phrase, unit_window(today, "year", back)?);
        }
    }
    // "三天前", "2个月前"
    for (suffix, unit) in [
        ("天前", "day"),
        ("个星期前", "week"),
        ("周前", "week"),
        ("个月前", "month"),
        ("年前", "year"),
    ] {
        if let Some(end) = query.find(suffix) {
            let digits: String = query[..end]
                .chars()
                .rev()
                .take_while(|character| chinese_digit(*character).is_some())
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            if let Some(count) = chinese_number(&digits) {
                return found(
                    &format!("{digits}{suffix}"),
                    unit_window(today, unit, count)?,
                );
            }
        }
    }
    None
}

/// `(phrase, year, month)` of the first "YYYY年M月", "M月" or "YYYY年" in `query`.
fn year_month(query: &str) -> Option<(String, Option<i32>, Option<u32>)> {
    let characters: Vec<char> = query.chars().collect();
    for (position, character) in characters.iter().enumerate() {
        if *character != '年' && *character != '月' {
            continue;
        }
        let digits: String = characters[..position]
            .iter()
            .rev()
            .take_while(|c| c.is_ascii_digit())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if digits.is_empty() {
            continue;
        }
        if *character == '年' {
            let year: i32 = digits
                .parse()
                .ok()
                .filter(|year| (1900..=2200).contains(year))?;
            // A month after the year?
            let rest: String = characters[position + 1..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            let month_follows = characters.get(position + 1 + rest.chars().count()) == Some(&'月');
            return match rest
                .parse::<u32>()
                .ok()
                .filter(|m| month_follows && (1..=12).contains(m))
            {
                Some(month) => Some((format!("{year}年{month}月"), Some(year), Some(month))),
                None => Some((format!("{year}年"), Some(year), None)),
            };
        }
        let month: u32 = digits
            .parse()
            .ok()
            .filter(|month| (1..=12).contains(month))?;
        return Some((format!("{month}月"), None, Some(month)));
    }
    None
}

fn chinese_digit(character: char) -> Option<i32> {
    match character {
        '0'..='9' => character.to_digit(10).map(|digit| digit as i32),
        '一' => Some(1),
        '二' | '两' => Some(2),
        '三' => Some(3),
        '四' => Some(4),
        '五' => Some(5),
        '六' => Some(6),
        '七' => Some(7),
        '八' => Some(8),
        '九' => Some(9),
        '十' => Some(10),
        _ => None,
    }
}

/// "3", "三", "十", "十二", "二十" (up to 99).
fn chinese_number(text: &str) -> Option<i32> {
    if text.is_empty() {
        return None;
    }
    if let Ok(number) = text.parse::<i32>() {
        return Some(number);
    }
    let values: Vec<i32> = text.chars().map(chinese_digit).collect::<Option<_>>()?;
    match values.as_slice() {
        [single] => Some(*single),
        [10, ones] => Some(10 + ones),
        [tens, 10] => Some(tens * 10),
        [tens, 10, ones] => Some(tens * 10 + ones),
        _ => None,
    }
}

fn number(word: &str) -> Option<i32> {
    let named = [
        "a", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    if let Some(position) = named.iter().position(|name| *name == word) {
        return Some(position.max(1) as i32);
    }
    word.parse().ok().filter(|count| (1..=100).contains(count))
}

fn month_number(word: &str) -> Option<u32> {
    MONTHS
        .iter()
        .chain(MORE_MONTHS.iter())
        .find(|(name, _)| *name == word)
        .map(|(_, month)| *month)
}

fn year_number(word: &str) -> Option<i32> {
    (word.len() == 4)
        .then(|| word.parse().ok())
        .flatten()
        .filter(|year| (1900..=2200).contains(year))
}

/// `(first month, length)` of a season's name.
fn season_months(season: &str) -> Option<(u32, u32)> {
    match season {
        "spring" => Some((3, 3)),
        "summer" => Some((6, 3)),
        "autumn" | "fall" => Some((9, 3)),
        "winter" => Some((12, 3)),
        _ => None,
    }
}

/// The season of that name now under way (`this`) or the last one that ended (`last`).
fn season_window(today: NaiveDate, season: &str, last: bool) -> Option<(NaiveDate, NaiveDate)> {
    let (first, _) = season_months(season)?;
    let mut start = NaiveDate::from_ymd_opt(today.year(), first, 1)?;
    // The latest start on or before today.
    if start > today {
        start = NaiveDate::from_ymd_opt(today.year() - 1, first, 1)?;
    }
    let mut end = add_months(start, 3)?;
    if last && end > today {
        start = NaiveDate::from_ymd_opt(start.year() - 1, first, 1)?;
        end = add_months(start, 3)?;
    }
    Some((start, end))
}

fn day(today: NaiveDate, offset: i64) -> (NaiveDate, NaiveDate) {
    let start = today + Duration::days(offset);
    (start, start + Duration::days(1))
}

/// The day, week, month or year `back` of them before the one holding `today`.
fn unit_window(today: NaiveDate, unit: &str, back: i32) -> Option<(NaiveDate, NaiveDate)> {
    match unit {
        "day" => Some(day(today, -i64::from(back))),
        "week" => {
            let monday = today - Duration::days(i64::from(today.weekday().num_days_from_monday()));
            let start = monday - Duration::weeks(i64::from(back));
            Some((start, start + Duration::weeks(1)))
        }
        "month" => {
            let first = NaiveDate::from_ymd_opt(today.year(), today.month(), 1)?;
            let start = add_months(first, -back)?;
            Some((start, add_months(start, 1)?))
        }
        "year" => year_window(today.year() - back),
        _ => None,
    }
}

fn month_window(year: i32, month: u32) -> Option<(NaiveDate, NaiveDate)> {
    let start = NaiveDate::from_ymd_opt(year, month, 1)?;
    Some((start, add_months(start, 1)?))
}

fn year_window(year: i32) -> Option<(NaiveDate, NaiveDate)> {
    Some((
        NaiveDate::from_ymd_opt(year, 1, 1)?,
        NaiveDate::from_ymd_opt(year + 1, 1, 1)?,
    ))
}

fn add_months(date: NaiveDate, months: i32) -> Option<NaiveDate> {
    let index = date.year() * 12 + date.month0() as i32 + months;
    NaiveDate::from_ymd_opt(index.div_euclid(12), index.rem_euclid(12) as u32 + 1, 1)
}

fn midnight(date: NaiveDate) -> DateTime<Utc> {
    Utc.from_utc_datetime(&date.and_time(chrono::NaiveTime::MIN))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thursday 2026-12-03, 10:00 UTC.
    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 3, 10, 0, 0).unwrap()
    }

    fn window(query: &str) -> Option<(String, String, String)> {
        time_in_query(query, now()).map(|time| {
            (
                time.phrase,
                time.from.format("%Y-%m-%d").to_string(),
                time.to.format("%Y-%m-%d").to_string(),
            )
        })
    }

    fn expect(query: &str, phrase: &str, from: &str, to: &str) {
        assert_eq!(
            window(query),
            Some((phrase.to_string(), from.to_string(), to.to_string())),
            "{query}"
        );
    }

    #[test]
    fn english_phrases_name_their_window() {
        expect(
            "what did she do yesterday?",
            "yesterday",
            "2026-12-02",
            "2026-12-03",
        );
        expect(
            "What did she do last month?",
            "last month",
            "2026-11-01",
            "2026-12-01",
        );
        expect(
            "plans for this week",
            "this week",
            "2026-11-30",
            "2026-12-07",
        );
        expect(
            "what happened last week",
            "last week",
            "2026-11-23",
            "2026-11-30",
        );
        expect("trips last year", "last year", "2025-01-01", "2026-01-01");
        expect(
            "where did we go in May 2023?",
            "may 2023",
            "2023-05-01",
            "2023-06-01",
        );
        expect(
            "what did I buy in May",
            "in may",
            "2026-05-01",
            "2026-06-01",
        );
        expect(
            "what did I buy in December",
            "in december",
            "2026-12-01",
            "2027-01-01",
        );
        expect(
            "what happened in 2023",
            "in 2023",
            "2023-01-01",
            "2024-01-01",
        );
        expect(
            "three days ago",
            "three days ago",
            "2026-11-30",
            "2026-12-01",
        );
        expect("2 months ago", "2 months ago", "2026-10-01", "2026-11-01");
        expect("a week ago", "a week ago", "2026-11-23", "2026-11-30");
        expect(
            "where did they go last summer",
            "last summer",
            "2026-06-01",
            "2026-09-01",
        );
        expect("this winter", "this winter", "2026-12-01", "2027-03-01");
        expect("last winter", "last winter", "2025-12-01", "2026-03-01");
    }

    #[test]
    fn chinese_phrases_name_their_window() {
        expect("上个月她做了什么？", "上个月", "2026-11-01", "2026-12-01");
        expect("她昨天去了哪里", "昨天", "2026-12-02", "2026-12-03");
        expect("上周的会议", "上周", "2026-11-23", "2026-11-30");
        expect(
            "去年夏天她去了哪里？",
            "去年夏天",
            "2025-06-01",
            "2025-09-01",
        );
        expect("去年的旅行", "去年", "2025-01-01", "2026-01-01");
        expect(
            "2023年5月发生了什么",
            "2023年5月",
            "2023-05-01",
            "2023-06-01",
        );
        expect("5月买了什么", "5月", "2026-05-01", "2026-06-01");
        expect("2023年的计划", "2023年", "2023-01-01", "2024-01-01");
        expect("三天前吃了什么", "三天前", "2026-11-30", "2026-12-01");
        expect("两个月前", "两个月前", "2026-10-01", "2026-11-01");
    }

    #[test]
    fn questions_without_time_and_look_alikes_name_none() {
        for query in [
            "where does the user live?",
            "may I ask what she likes?",
            "用户喜欢喝什么？",
            "what is ticket OPS-4471 about",
            "the last word",
        ] {
            assert_eq!(window(query), None, "{query}");
        }
    }
}
