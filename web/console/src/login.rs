//! The sign-in page: an e-mail + password form bound to the `login` server function.
//! It works before hydration too: the plain form post redirects back with the error in the URL.

use crate::api::Login;
use crate::i18n::{load_whole_page_when, tr, trf};
use crate::model::ConsoleError;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn LoginPage() -> impl IntoView {
    let login = ServerAction::<Login>::new();
    // Signed in: the console in the account's language (this sign-in page is in the
    // browser's).
    load_whole_page_when(
        move || matches!(login.value().get(), Some(Ok(()))),
        Some("/console"),
    );
    let error = move || {
        login
            .value()
            .get()
            .and_then(Result::err)
            .map(|err| match err {
                ConsoleError::InvalidCredentials => tr("Wrong e-mail or password.").to_owned(),
                ConsoleError::TooManyAttempts {
                    retry_after_seconds,
                } => trf(
                    "Too many failed sign-ins. Try again in {} minutes.",
                    &[&retry_after_seconds.div_ceil(60)],
                ),
                other => trf("Sign-in failed: {}.", &[&other.localized()]),
            })
    };

    view! {
        <Title text=tr("Sign in · Engram console") />
        <main class="centered">
            <section class="card login-card">
                <h1 class="brand">"Engram"</h1>
                <p class="muted">{tr("Sign in to the admin console.")}</p>
                <ActionForm action=login attr:class="stack" attr:data-testid="login-form">
                    <label>
                        <span>{tr("E-mail")}</span>
                        <input
                            type="email"
                            name="email"
                            required
                            autocomplete="username"
                            data-testid="login-email"
                        />
                    </label>
                    <label>
                        <span>{tr("Password")}</span>
                        <input
                            type="password"
                            name="password"
                            required
                            autocomplete="current-password"
                            data-testid="login-password"
                        />
                    </label>
                    {move || {
                        error()
                            .map(|message| {
                                view! {
                                    <p class="error" role="alert" data-testid="login-error">
                                        {message}
                                    </p>
                                }
                            })
                    }}
                    <button
                        type="submit"
                        class="primary"
                        data-testid="login-submit"
                        disabled=move || login.pending().get()
                    >
                        {tr("Sign in")}
                    </button>
                </ActionForm>
            </section>
        </main>
    }
}
