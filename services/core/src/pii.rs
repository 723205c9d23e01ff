//! Personal data detection before anything is stored or embedded: e-mail addresses, phone
//! numbers (international, North American and mainland-China mobile formats), payment card
//! numbers (Luhn-checked) and PRC resident identity numbers (checksum and birth date checked).

use serde::{Deserialize, Serialize};
use std::sync::LazyLock;

/// What kind of personal data a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PiiKind {
    Email,
    Phone,
    PaymentCard,
    NationalId,
}

impl PiiKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            PiiKind::Email => "email",
            PiiKind::Phone => "phone",
            PiiKind::PaymentCard => "payment_card",
            PiiKind::NationalId => "national_id",
        }
    }

    /// What replaces a finding when masking.
    pub const fn mask(self) -> &'static str {
        match self {
            PiiKind::Email => "[email]",
            PiiKind::Phone => "[phone]",
            PiiKind::PaymentCard => "[payment_card]",
            PiiKind::NationalId => "[national_id]",
        }
    }
}

/// One piece of personal data in a text: its kind and byte range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PiiFinding {
    pub kind: PiiKind,
    pub start: usize,
    pub end: usize,
}

/// A project's choice of what happens to personal data in memory content.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PiiRedaction {
    /// Stored as written.
    #[default]
    Off,
    /// Replaced by `[email]`, `[phone]`, `[payment_card]` or `[national_id]`.
    Mask,
    /// The write is refused (422) naming the kinds found, and nothing is stored.
    Reject,
}

impl PiiRedaction {
    pub const fn as_str(self) -> &'static str {
        match self {
            PiiRedaction::Off => "off",
            PiiRedaction::Mask => "mask",
            PiiRedaction::Reject => "reject",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "off" => Some(PiiRedaction::Off),
            "mask" => Some(PiiRedaction::Mask),
            "reject" => Some(PiiRedaction::Reject),
            _ => None,
        }
    }
}

#[expect(
    clippy::expect_used,
    reason = "a constant pattern: the unit tests compile it"
)]
static EMAIL: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
        .expect("valid e-mail pattern")
});

/// 17 digits and a digit or X, optionally with spaces after the region and birth date.
#[expect(
    clippy::expect_used,
    reason = "a constant pattern: the unit tests compile it"
)]
static NATIONAL_ID: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"\d{6} ?\d{8} ?\d{3}[0-9Xx]").expect("valid national id pattern")
});

/// 13–19 digits, optionally grouped by single spaces or hyphens.
#[expect(
    clippy::expect_used,
    reason = "a constant pattern: the unit tests compile it"
)]
static CARD: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"\d(?:[ \-]?\d){12,18}").expect("valid card pattern"));

#[expect(
    clippy::expect_used,
    reason = "a constant pattern: the unit tests compile it"
)]
static PHONES: LazyLock<Vec<regex::Regex>> = LazyLock::new(|| {
    [
        // Mainland China mobile: 1[3-9]x xxxx xxxx, optionally +86 / 0086, grouped 3-4-4.
        r"(?:(?:\+|00)86[ \-]?)?1[3-9]\d(?:[ \-]?\d{4}){2}",
        // International with a country code: +44 20 7946 0958, +1-415-555-0132.
        r"\+\d{1,3}(?:[ .\-]?\(?\d{1,4}\)?){1,5}(?:[ .\-]?\d{2,4})",
        // North American: (415) 555-0132, 415-555-0132, 415.555.0132.
        r"\(?\d{3}\)?[ .\-]\d{3}[ .\-]\d{4}",
    ]
    .iter()
    .map(|pattern| regex::Regex::new(pattern).expect("valid phone pattern"))
    .collect()
});

/// Every piece of personal data in `text`, in order, without overlaps (national ids win
/// over cards, cards over phones).
pub fn find_pii(text: &str) -> Vec<PiiFinding> {
    // Taken spans by start: they never overlap, so a new span overlaps one only if it
    // overlaps the last that starts before its end (a lookup, not a scan: linear overall).
    let mut taken: std::collections::BTreeMap<usize, PiiFinding> = Default::default();
    let add = |finding: PiiFinding, taken: &mut std::collections::BTreeMap<usize, PiiFinding>| {
        let overlaps = taken
            .range(..finding.end)
            .next_back()
            .is_some_and(|(_, before)| before.end > finding.start);
        if !overlaps {
            taken.insert(finding.start, finding);
        }
    };
    let findings = &mut taken;
    for found in NATIONAL_ID.find_iter(text) {
        if standalone_number(text, found.start(), found.end()) && is_prc_resident_id(found.as_str())
        {
            add(finding(PiiKind::NationalId, &found), findings);
        }
    }
    for found in CARD.find_iter(text) {
        if standalone_number(text, found.start(), found.end()) && is_payment_card(found.as_str()) {
            add(finding(PiiKind::PaymentCard, &found), findings);
        }
    }
    for pattern in PHONES.iter() {
        for found in pattern.find_iter(text) {
            let digits = found.as_str().chars().filter(char::is_ascii_digit).count();
            if (8..=15).contains(&digits) && standalone_number(text, found.start(), found.end()) {
                add(finding(PiiKind::Phone, &found), findings);
            }
        }
    }
    for found in EMAIL.find_iter(text) {
        add(finding(PiiKind::Email, &found), findings);
    }
    taken.into_values().collect()
}

/// `text` with every finding replaced by its mask, and the findings.
pub fn mask_pii(text: &str) -> (String, Vec<PiiFinding>) {
    let findings = find_pii(text);
    if findings.is_empty() {
        return (text.to_string(), findings);
    }
    let mut masked = String::with_capacity(text.len());
    let mut position = 0;
    for finding in &findings {
        masked.push_str(&text[position..finding.start]);
        masked.push_str(finding.kind.mask());
        position = finding.end;
    }
    masked.push_str(&text[position..]);
    (masked, findings)
}

fn finding(kind: PiiKind, found: &regex::Match<'_>) -> PiiFinding {
    PiiFinding {
        kind,
        start: found.start(),
        end: found.end(),
    }
}

/// Not part of a longer number or word: `order 1234567890123456789` is not a card, and the
/// digits inside `v2.13800138000` are not a phone.
fn standalone_number(text: &str, start: usize, end: usize) -> bool {
    let joins = |neighbour: Option<char>| {
        neighbour.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '+')
    };
    let is_separator = |c: Option<char>| matches!(c, Some('-' | '.' | '/'));
    let is_digit = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit());
    let mut before = text[..start].chars().rev();
    let mut after = text[end..].chars();
    let (before_one, before_two) = (before.next(), before.next());
    let (after_one, after_two) = (after.next(), after.next());
    // A digit group joined to more digits by a separator is part of a longer number.
    let longer_number = (is_separator(before_one) && is_digit(before_two))
        || (is_separator(after_one) && is_digit(after_two));
    !joins(before_one) && !joins(after_one) && !longer_number
}

/// The Luhn check over 13–19 digits (separators ignored), refusing one repeated digit.
pub fn is_payment_card(candidate: &str) -> bool {
    let digits: Vec<u32> = candidate
        .chars()
        .filter(|c| !matches!(c, ' ' | '-'))
        .map(|c| c.to_digit(10))
        .collect::<Option<Vec<u32>>>()
        .unwrap_or_default();
    if !(13..=19).contains(&digits.len()) || digits.iter().all(|digit| *digit == digits[0]) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(position, digit)| {
            if position % 2 == 1 {
                let doubled = digit * 2;
                if doubled > 9 { doubled - 9 } else { doubled }
            } else {
                *digit
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// GB 11643-1999: 6-digit region, 8-digit birth date, 3-digit sequence, and a check
/// character from the weighted sum of the first 17 digits modulo 11.
pub fn is_prc_resident_id(candidate: &str) -> bool {
    const WEIGHTS: [u32; 17] = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];
    const CHECK: [char; 11] = ['1', '0', 'X', '9', '8', '7', '6', '5', '4', '3', '2'];
    let characters: Vec<char> = candidate
        .chars()
        .filter(|c| *c != ' ')
        .map(|c| c.to_ascii_uppercase())
        .collect();
    if characters.len() != 18 {
        return false;
    }
    let mut sum = 0;
    for (character, weight) in characters[..17].iter().zip(WEIGHTS) {
        let Some(digit) = character.to_digit(10) else {
            return false;
        };
        sum += digit * weight;
    }
    if CHECK[(sum % 11) as usize] != characters[17] {
        return false;
    }
    let birth: String = characters[6..14].iter().collect();
    let (Ok(year), Ok(month), Ok(day)) = (
        birth[..4].parse::<u32>(),
        birth[4..6].parse::<u32>(),
        birth[6..].parse::<u32>(),
    ) else {
        return false;
    };
    (1900..=2100).contains(&year) && (1..=12).contains(&month) && (1..=31).contains(&day)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A content of the largest size packed with personal data: every piece found once, in
    /// order, without overlaps (overlaps used to be checked against every earlier finding).
    #[test]
    fn thirty_two_kibibytes_of_findings_are_found_in_order_without_overlaps() {
        let text = "a@b.co 4111 1111 1111 1111 ".repeat(32 * 1024 / 27);
        let findings = find_pii(&text);
        let pieces = 32 * 1024 / 27;
        assert_eq!(findings.len(), pieces * 2);
        assert!(findings.windows(2).all(|pair| pair[0].end <= pair[1].start));
        assert_eq!(findings[0].kind, PiiKind::Email);
        assert_eq!(findings[1].kind, PiiKind::PaymentCard);
    }

    fn kinds(text: &str) -> Vec<PiiKind> {
        find_pii(text)
            .into_iter()
            .map(|finding| finding.kind)
            .collect()
    }

    #[test]
    fn finds_each_kind_in_its_usual_formats() {
        let positives: &[(&str, PiiKind)] = &[
            ("write to jane.doe+work@example.co.uk today", PiiKind::Email),
            ("邮箱 li.wei@qq.com 联系", PiiKind::Email),
            ("call 13812345678 after six", PiiKind::Phone),
            ("手机 138 1234 5678", PiiKind::Phone),
            ("mobile +86 139-1234-5678", PiiKind::Phone),
            ("dial 0086 15912345678", PiiKind::Phone),
            ("office +44 20 7946 0958", PiiKind::Phone),
            ("US line (415) 555-0132", PiiKind::Phone),
            ("or 415-555-0132", PiiKind::Phone),
            ("card 4111 1111 1111 1111 exp 12/29", PiiKind::PaymentCard),
            ("Mastercard 5500-0000-0000-0004", PiiKind::PaymentCard),
            ("amex 378282246310005", PiiKind::PaymentCard),
            ("身份证 11010519491231002X", PiiKind::NationalId),
            ("id 110105 19491231 002x on file", PiiKind::NationalId),
            ("ID: 440524198001010013.", PiiKind::NationalId),
        ];
        for (text, kind) in positives {
            assert_eq!(kinds(text), vec![*kind], "{text}");
        }
    }

    #[test]
    fn leaves_ordinary_numbers_and_text_alone() {
        let negatives = [
            "The meeting is on 2024-01-15 at 10:30.",
            "Version 1.2.3 fixed 12345 bugs.",
            "Order 4111111111111112 failed the Luhn check",
            "Card-like but all zeros 0000 0000 0000 0000",
            "id 11010519491231002Y has a wrong check digit",
            "id 110105194913310021 has month 13",
            "The user prefers dark mode and tea at 3 pm.",
            "an @mention and foo@bar are not addresses",
            "build 20240115123045 finished",
            "pi is 3.14159265358979",
            "tracking number 1Z999AA10123456784",
            "12812345678 is not a mobile number (no 12x prefix)",
        ];
        for text in negatives {
            assert_eq!(kinds(text), Vec::<PiiKind>::new(), "{text}");
        }
    }

    #[test]
    fn masking_replaces_every_finding_and_keeps_the_rest() {
        let (masked, findings) =
            mask_pii("Alice (alice@example.com, 13812345678) paid with 4111-1111-1111-1111.");
        assert_eq!(masked, "Alice ([email], [phone]) paid with [payment_card].");
        assert_eq!(findings.len(), 3);
        let (unchanged, none) = mask_pii("nothing personal here");
        assert_eq!(unchanged, "nothing personal here");
        assert!(none.is_empty());
    }

    #[test]
    fn checksums_follow_their_standards() {
        assert!(is_prc_resident_id("11010519491231002X"));
        assert!(!is_prc_resident_id("110105194912310021"));
        assert!(is_payment_card("4012888888881881"));
        assert!(!is_payment_card("4012888888881882"));
        assert!(!is_payment_card("1234"));
    }
}
