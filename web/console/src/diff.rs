//! Word diffs between two versions of a memory, for the history on the memory page.
//! Longest common subsequence over words; long texts fall back to "all removed, all added".

use crate::model::DiffPart;

/// Texts longer than this (in words) are not aligned word by word.
const MAX_ALIGNED_WORDS: usize = 1_500;

/// The changes that turn `old` into `new`, adjacent parts of one kind merged.
pub fn word_diff(old: &str, new: &str) -> Vec<DiffPart> {
    let old_words: Vec<&str> = old.split_whitespace().collect();
    let new_words: Vec<&str> = new.split_whitespace().collect();
    let mut parts: Vec<DiffPart> = Vec::new();
    let mut push = |change: &str, word: &str| match parts.last_mut() {
        Some(last) if last.change == change => {
            last.text.push(' ');
            last.text.push_str(word);
        }
        _ => parts.push(DiffPart {
            change: change.to_string(),
            text: word.to_string(),
        }),
    };
    if old_words.len() > MAX_ALIGNED_WORDS || new_words.len() > MAX_ALIGNED_WORDS {
        for word in &old_words {
            push("removed", word);
        }
        for word in &new_words {
            push("added", word);
        }
        return parts;
    }
    // lengths[i][j]: longest common subsequence of old_words[i..] and new_words[j..].
    let mut lengths = vec![vec![0u16; new_words.len() + 1]; old_words.len() + 1];
    for i in (0..old_words.len()).rev() {
        for j in (0..new_words.len()).rev() {
            lengths[i][j] = if old_words[i] == new_words[j] {
                lengths[i + 1][j + 1] + 1
            } else {
                lengths[i + 1][j].max(lengths[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < old_words.len() && j < new_words.len() {
        if old_words[i] == new_words[j] {
            push("same", old_words[i]);
            i += 1;
            j += 1;
        } else if lengths[i + 1][j] >= lengths[i][j + 1] {
            push("removed", old_words[i]);
            i += 1;
        } else {
            push("added", new_words[j]);
            j += 1;
        }
    }
    for word in &old_words[i..] {
        push("removed", word);
    }
    for word in &new_words[j..] {
        push("added", word);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(parts: &[DiffPart]) -> String {
        parts
            .iter()
            .map(|part| match part.change.as_str() {
                "added" => format!("[+{}]", part.text),
                "removed" => format!("[-{}]", part.text),
                _ => part.text.clone(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn shows_words_removed_and_added() {
        let parts = word_diff(
            "Alice keeps bees in Lyon.",
            "Alice keeps two hives in Annecy.",
        );
        assert_eq!(
            render(&parts),
            "Alice keeps [-bees] [+two hives] in [-Lyon.] [+Annecy.]"
        );
        assert!(
            word_diff("same text", "same text")
                .iter()
                .all(|p| p.change == "same")
        );
        assert_eq!(render(&word_diff("", "new")), "[+new]");
    }
}
