//! The console in a real browser: headless Chromium driven by playwright-core against a
//! spawned `engram serve`.

mod console;
