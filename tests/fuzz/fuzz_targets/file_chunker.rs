//! An uploaded file's text cut into chunks: never a panic (a slice off a character
//! boundary), never a character lost or invented, never an empty chunk.
#![no_main]

use engram_core::files::{FileFormat, chunk_file};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (bool, u16, &str)| {
    let (markdown, target, text) = input;
    let format = if markdown {
        FileFormat::Markdown
    } else {
        FileFormat::PlainText
    };
    let target = usize::from(target % 4_000);
    let chunks = chunk_file(format, text, target);
    for (index, chunk) in chunks.iter().enumerate() {
        assert_eq!(chunk.index, index);
        assert!(!chunk.content.trim().is_empty());
    }
    if !markdown {
        // Plain text keeps every character but whitespace, in order (a word longer than a
        // chunk is cut inside; Markdown moves headings into each of their chunks).
        let kept = |text: &str| text.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        let chunked: String = chunks.iter().map(|chunk| kept(&chunk.content)).collect();
        assert_eq!(kept(text), chunked);
    }
});
