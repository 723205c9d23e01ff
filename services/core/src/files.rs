//! Uploaded files: their safe names, their formats, and the chunks they are cut into before
//! each chunk becomes a memory (`source = file`) with a reference back to the file.

use crate::ids::MemoryId;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Largest file one upload may carry.
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;
/// Most chunks one file may become.
pub const MAX_CHUNKS_PER_FILE: usize = 5_000;
/// A chunk is packed up to about this many characters (the local model reads 256 tokens,
/// roughly 1,000 characters of English, so longer chunks would not be embedded whole).
pub const CHUNK_TARGET_CHARS: usize = 900;

/// A file name as the uploader gave it, checked to be a plain name: 1–255 characters, no
/// directory parts, no control characters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileName(String);

impl FileName {
    pub fn parse(text: &str) -> Result<Self, String> {
        let name = text.trim();
        if name.is_empty() {
            return Err("must not be empty".to_string());
        }
        if name.chars().count() > 255 {
            return Err("must be at most 255 characters".to_string());
        }
        if name.contains(['/', '\\']) {
            return Err("must be a plain file name without directories".to_string());
        }
        if name == "." || name == ".." {
            return Err("must be a file name".to_string());
        }
        if name.chars().any(char::is_control) {
            return Err("must not contain control characters".to_string());
        }
        Ok(Self(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn extension(&self) -> Option<String> {
        self.0
            .rsplit_once('.')
            .map(|(_, extension)| extension.to_ascii_lowercase())
    }
}

/// What the file's text is, which decides how it is cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileFormat {
    PlainText,
    Markdown,
}

impl FileFormat {
    pub const fn as_str(self) -> &'static str {
        match self {
            FileFormat::PlainText => "plain_text",
            FileFormat::Markdown => "markdown",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "plain_text" => Some(FileFormat::PlainText),
            "markdown" => Some(FileFormat::Markdown),
            _ => None,
        }
    }

    /// The format from the upload's media type, with the name's extension deciding for
    /// `text/plain` and `application/octet-stream`; `None` for anything else.
    pub fn detect(media_type: &str, name: &FileName) -> Option<Self> {
        let media_type = media_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        let by_extension = match name.extension().as_deref() {
            Some("md" | "markdown") => Some(FileFormat::Markdown),
            Some("txt" | "text" | "log") => Some(FileFormat::PlainText),
            _ => None,
        };
        match media_type.as_str() {
            "text/markdown" | "text/x-markdown" => Some(FileFormat::Markdown),
            "text/plain" => Some(by_extension.unwrap_or(FileFormat::PlainText)),
            "application/octet-stream" => by_extension,
            _ => None,
        }
    }
}

/// One piece of a file, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChunk {
    /// 0-based position in the file.
    pub index: usize,
    /// The Markdown headings the chunk sits under, outermost first (`Setup > Install`).
    pub heading: Option<String>,
    /// What is stored and embedded: the heading line (if any), a blank line, then the text,
    /// so a chunk keeps its context when it is recalled alone.
    pub content: String,
}

/// Cut a file's text into chunks of about `target_chars`: Markdown by section (headings
/// outside code fences) and then by paragraph, plain text by paragraph; a paragraph longer
/// than the target is split at sentence ends, else at spaces, else anywhere.
pub fn chunk_file(format: FileFormat, text: &str, target_chars: usize) -> Vec<FileChunk> {
    let text = text.replace("\r\n", "\n");
    let target_chars = target_chars.max(80);
    let mut chunks = Vec::new();
    for section in sections(format, &text) {
        let heading = (!section.headings.is_empty()).then(|| section.headings.join(" > "));
        let room =
            target_chars.saturating_sub(heading.as_ref().map_or(0, |h| h.chars().count() + 2));
        for body in pack(&section.blocks, room.max(40)) {
            let content = match &heading {
                Some(heading) => format!("{heading}\n\n{body}"),
                None => body,
            };
            chunks.push(FileChunk {
                index: chunks.len(),
                heading: heading.clone(),
                content,
            });
        }
    }
    chunks
}

struct Section {
    headings: Vec<String>,
    blocks: Vec<String>,
}

/// Sections of the text with their heading path and their paragraphs (code fences kept
/// whole as one block).
fn sections(format: FileFormat, text: &str) -> Vec<Section> {
    let mut sections = vec![Section {
        headings: Vec::new(),
        blocks: Vec::new(),
    }];
    let mut heading_stack: Vec<(usize, String)> = Vec::new();
    let mut block = String::new();
    let mut in_fence = false;
    let flush = |block: &mut String, sections: &mut Vec<Section>| {
        let trimmed = block.trim();
        if !trimmed.is_empty()
            && let Some(section) = sections.last_mut()
        {
            section.blocks.push(trimmed.to_string());
        }
        block.clear();
    };
    for line in text.lines() {
        if format == FileFormat::Markdown {
            let trimmed = line.trim_start();
            if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                in_fence = !in_fence;
            }
            if !in_fence && let Some((level, title)) = markdown_heading(line) {
                flush(&mut block, &mut sections);
                while heading_stack.last().is_some_and(|(open, _)| *open >= level) {
                    heading_stack.pop();
                }
                heading_stack.push((level, title));
                sections.push(Section {
                    headings: heading_stack
                        .iter()
                        .map(|(_, title)| title.clone())
                        .collect(),
                    blocks: Vec::new(),
                });
                continue;
            }
            if line.trim().is_empty() && !in_fence {
                flush(&mut block, &mut sections);
                continue;
            }
        } else if line.trim().is_empty() {
            flush(&mut block, &mut sections);
            continue;
        }
        if !block.is_empty() {
            block.push('\n');
        }
        block.push_str(line.trim_end());
    }
    flush(&mut block, &mut sections);
    sections.retain(|section| !section.blocks.is_empty());
    sections
}

/// `## Install` → (2, "Install").
fn markdown_heading(line: &str) -> Option<(usize, String)> {
    let trimmed = line.trim_start();
    let level = trimmed.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &trimmed[level..];
    if !rest.starts_with(' ') {
        return None;
    }
    let title = rest.trim().trim_end_matches('#').trim();
    (!title.is_empty()).then(|| (level, title.to_string()))
}

/// Blocks packed greedily into pieces of at most `room` characters.
fn pack(blocks: &[String], room: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    for block in blocks {
        for part in split_long(block, room) {
            let needed = if current.is_empty() {
                0
            } else {
                current.chars().count() + 2
            };
            if needed + part.chars().count() > room && !current.is_empty() {
                pieces.push(std::mem::take(&mut current));
            }
            if !current.is_empty() {
                current.push_str("\n\n");
            }
            current.push_str(&part);
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// A block cut into parts of at most `room` characters, at sentence ends where possible.
fn split_long(block: &str, room: usize) -> Vec<String> {
    if block.chars().count() <= room {
        return vec![block.to_string()];
    }
    let mut parts = Vec::new();
    let mut rest: &str = block;
    // Counted once and kept up to date: recounting the rest on every cut made a long
    // paragraph quadratic.
    let mut rest_chars = rest.chars().count();
    while rest_chars > room {
        let limit = rest
            .char_indices()
            .nth(room)
            .map_or(rest.len(), |(byte, _)| byte);
        let window = &rest[..limit];
        let cut = window
            .rfind(". ")
            .or_else(|| window.rfind("? "))
            .or_else(|| window.rfind("! "))
            .map(|at| at + 1)
            .filter(|at| *at > limit / 3)
            .or_else(|| {
                window
                    .rfind(char::is_whitespace)
                    .filter(|at| *at > limit / 3)
            })
            .unwrap_or(limit);
        parts.push(rest[..cut].trim().to_string());
        let next = rest[cut..].trim_start();
        rest_chars -= rest[..rest.len() - next.len()].chars().count();
        rest = next;
    }
    if !rest.trim().is_empty() {
        parts.push(rest.trim().to_string());
    }
    parts.retain(|part| !part.is_empty());
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest upload is one paragraph of 4 MiB without a sentence end: it is cut into
    /// pieces of the target size that put the text back together (the cut used to recount
    /// the rest of the paragraph each time: quadratic on exactly this input).
    #[test]
    fn a_four_mebibyte_paragraph_is_cut_whole_and_in_order() {
        let text = "word ".repeat(4 * 1024 * 1024 / 5);
        let chunks = chunk_file(FileFormat::PlainText, &text, 1_000);
        assert!(chunks.len() > 4_000, "{}", chunks.len());
        assert!(
            chunks
                .iter()
                .all(|chunk| chunk.content.chars().count() <= 1_000)
        );
        let rejoined: Vec<&str> = chunks
            .iter()
            .flat_map(|chunk| chunk.content.split_whitespace())
            .collect();
        assert_eq!(rejoined.len(), text.split_whitespace().count());
    }

    #[test]
    fn names_with_directories_or_control_characters_are_refused() {
        assert!(FileName::parse("notes.md").is_ok());
        assert!(FileName::parse("Résumé 2026.txt").is_ok());
        for bad in [
            "",
            "  ",
            "../etc/passwd",
            "a/b.md",
            "a\\b.md",
            "..",
            "bad\u{0}name",
            "x\ny",
        ] {
            assert!(FileName::parse(bad).is_err(), "{bad:?}");
        }
        assert!(FileName::parse(&"a".repeat(256)).is_err());
    }

    #[test]
    fn the_format_follows_the_media_type_then_the_extension() {
        let name = |text: &str| FileName::parse(text).unwrap();
        assert_eq!(
            FileFormat::detect("text/markdown; charset=utf-8", &name("a.txt")),
            Some(FileFormat::Markdown)
        );
        assert_eq!(
            FileFormat::detect("text/plain", &name("a.md")),
            Some(FileFormat::Markdown)
        );
        assert_eq!(
            FileFormat::detect("text/plain", &name("a")),
            Some(FileFormat::PlainText)
        );
        assert_eq!(
            FileFormat::detect("application/octet-stream", &name("a.log")),
            Some(FileFormat::PlainText)
        );
        assert_eq!(
            FileFormat::detect("application/octet-stream", &name("a.pdf")),
            None
        );
        assert_eq!(FileFormat::detect("image/png", &name("a.md")), None);
    }

    #[test]
    fn markdown_is_cut_by_section_with_its_heading_path() {
        let text = "Intro line.\n\n# Guide\n\nRead this.\n\n## Install\n\nRun the installer.\n\n```\n# not a heading\n\nstill code\n```\n\n## Use\n\nStart it.\n";
        let chunks = chunk_file(FileFormat::Markdown, text, 900);
        let headings: Vec<Option<&str>> = chunks.iter().map(|c| c.heading.as_deref()).collect();
        assert_eq!(
            headings,
            [
                None,
                Some("Guide"),
                Some("Guide > Install"),
                Some("Guide > Use")
            ]
        );
        assert_eq!(
            chunks[2].content,
            "Guide > Install\n\nRun the installer.\n\n```\n# not a heading\n\nstill code\n```"
        );
        assert_eq!(
            chunks.iter().map(|c| c.index).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
    }

    #[test]
    fn long_paragraphs_are_split_at_sentence_ends_and_nothing_is_lost() {
        let sentence = "The quick brown fox jumps over the lazy dog. ";
        let text = sentence.repeat(60);
        let chunks = chunk_file(FileFormat::PlainText, &text, 300);
        assert!(chunks.len() > 5);
        for chunk in &chunks {
            assert!(
                chunk.content.chars().count() <= 300,
                "{}",
                chunk.content.len()
            );
            assert!(chunk.content.ends_with('.'), "{:?}", chunk.content);
        }
        let words: usize = chunks
            .iter()
            .map(|c| c.content.split_whitespace().count())
            .sum();
        assert_eq!(words, text.split_whitespace().count());
    }

    #[test]
    fn short_paragraphs_are_packed_together() {
        let text = "One.\n\nTwo.\n\nThree.";
        let chunks = chunk_file(FileFormat::PlainText, text, 900);
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].content, "One.\n\nTwo.\n\nThree.");
    }
}

text_enum!(
    /// Where an uploaded file stands: queued for ingest, being chunked and embedded, done,
    /// or failed (with the reason on the file).
    FileStatus {
        Queued => "queued",
        Ingesting => "ingesting",
        Ingested => "ingested",
        Failed => "failed",
    }
);

impl FileStatus {
    /// Queued or being ingested: its memories are still being written.
    pub fn is_in_progress(self) -> bool {
        matches!(self, FileStatus::Queued | FileStatus::Ingesting)
    }
}

/// A stored file, without its text.
#[derive(Clone, Debug, PartialEq)]
pub struct FileRecord {
    pub id: Uuid,
    pub name: String,
    pub format: String,
    pub size_bytes: i64,
    pub sha256: String,
    pub user_id: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub kind: String,
    pub credential: String,
    /// `queued | ingesting | ingested | failed`
    pub status: FileStatus,
    pub chunk_count: i32,
    pub memory_ids: Vec<MemoryId>,
    pub task_id: Uuid,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}
