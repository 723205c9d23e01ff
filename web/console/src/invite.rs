//! The invitation page: reached from an invitation link without a session, it names the
//! organization and role, and lets the invitee choose a password (which signs them in).

use crate::api::{AcceptInvitation, load_invitation};
use crate::i18n::{load_whole_page_when, tr, trf};
use crate::model::{ConsoleError, MIN_PASSWORD_CHARS, role_name};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

#[component]
pub fn InvitePage() -> impl IntoView {
    let token = use_query_map()
        .get_untracked()
        .get("token")
        .unwrap_or_default();
    let accept = ServerAction::<AcceptInvitation>::new();
    // Joined and signed in: the console, in the account's language.
    load_whole_page_when(
        move || matches!(accept.value().get(), Some(Ok(()))),
        Some("/console"),
    );
    let token_for_preview = token.clone();
    let preview = Resource::new(|| (), move |_| load_invitation(token_for_preview.clone()));
    let error = move || {
        accept.value().get().and_then(Result::err).map(|error| {
            let message = match error {
                ConsoleError::NotFound => {
                    tr("This invitation is no longer valid: ask for a new one.").to_string()
                }
                other => other.localized(),
            };
            view! { <p class="error" role="alert" data-testid="invite-error">{message}</p> }
        })
    };
    let body = move || {
        let token = token.clone();
        Suspend::new(async move {
            match preview.await {
                Ok(invitation) => view! {
                    <p data-testid="invite-greeting">
                        {tr("You are invited to ")}<strong translate="no">{invitation.organization_name}</strong>
                        {tr(" as ")}<strong>{role_name(&invitation.role)}</strong>" ("<span translate="no">{invitation.email}</span>")."
                    </p>
                    <ActionForm action=accept attr:class="stack" attr:data-testid="accept-form">
                        <input type="hidden" name="token" value=token />
                        <label>
                            <span>{trf("New password (at least {} characters)", &[&MIN_PASSWORD_CHARS])}</span>
                            <input type="password" name="password" required autocomplete="new-password" data-testid="invite-password" />
                        </label>
                        <label>
                            <span>{tr("The same password again")}</span>
                            <input type="password" name="password_again" required autocomplete="new-password" data-testid="invite-password-again" />
                        </label>
                        {error}
                        <button type="submit" class="primary" data-testid="accept-invitation">{tr("Join")}</button>
                    </ActionForm>
                }
                .into_any(),
                Err(_) => view! {
                    <p class="error" role="alert" data-testid="invite-invalid">
                        {tr("This invitation is no longer valid: it was used, withdrawn or has expired. Ask for a new one.")}
                    </p>
                }
                .into_any(),
            }
        })
    };
    view! {
        <Title text=tr("Join · Engram console") />
        <main class="centered">
            <section class="card login-card">
                <h1 class="brand">"Engram"</h1>
                <Suspense fallback=|| view! { <p class="muted">{tr("Checking the invitation…")}</p> }>{body}</Suspense>
            </section>
        </main>
    }
}
