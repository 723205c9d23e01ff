//! The Leptos admin console (SSR + hydrate), served under `/console` by the gateway.
//! Server side: [`console_router`] over a [`ConsoleBackend`]; browser side: [`hydrate`].

// The page views nest deeply enough to exceed the default type recursion limit.
#![recursion_limit = "256"]

pub mod api;
pub mod app;
mod audit;
pub mod charts;
mod confirm;
pub mod diff;
pub mod i18n;
mod invite;
mod keys;
mod login;
mod members;
mod memories;
mod memory;
pub mod model;
mod prices;
mod project_picker;
mod recall;
mod runs;
mod settings;
mod statements;
mod subjects;
pub mod topbar;
mod usage;

#[cfg(feature = "ssr")]
mod backend;
#[cfg(feature = "ssr")]
mod server;

pub use model::{
    ConsoleAccount, ConsoleCaller, ConsoleError, ConsoleRequestOrigin, MEMORY_KINDS,
    MEMORY_PAGE_LIMIT, MemoryListQuery, MemoryPage, MemoryRow, ProjectSummary,
};

/// Re-exported so implementors of [`ConsoleBackend`] use the same macro version.
#[cfg(feature = "ssr")]
pub use async_trait::async_trait;
#[cfg(feature = "ssr")]
pub use backend::ConsoleBackend;
#[cfg(feature = "ssr")]
pub use server::{ConsoleAssets, console_router};

/// File stem of the hydrate bundle: `engram-console.js` + `engram-console_bg.wasm`.
/// `scripts/build-console.sh` passes the same name to `wasm-bindgen --out-name`.
pub const BUNDLE_NAME: &str = "engram-console";

/// Entry point the hydration script calls once the wasm module is loaded.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(app::App);
}
