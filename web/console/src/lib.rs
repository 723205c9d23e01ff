//! The Leptos admin console (SSR + hydrate).
