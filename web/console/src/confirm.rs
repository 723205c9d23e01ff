//! A destructive action asked once: a button opens the question that names what will happen,
//! beside the button that does it. Plain `<details>`, so it works before hydration too.

use leptos::prelude::*;

#[component]
pub fn Confirm(
    /// The button that opens the question ("Revoke…").
    label: &'static str,
    /// What the action will do, in a sentence.
    question: String,
    /// Test id of the opening button; the action's own button inside keeps its own.
    test_id: &'static str,
    /// The form that does it.
    children: Children,
) -> impl IntoView {
    view! {
        <details class="confirm">
            <summary class="ghost" data-testid=test_id>{label}</summary>
            <div class="confirm-question">
                <p>{question}</p>
                {children()}
            </div>
        </details>
    }
}
