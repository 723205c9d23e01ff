//! The sign-in page: an e-mail + password form bound to the `login` server function.
//! It works before hydration too: the plain form post redirects back with the error in the URL.

use crate::api::Login;
use crate::model::ConsoleError;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn LoginPage() -> impl IntoView {
    let login = ServerAction::<Login>::new();
    let error = move || {
        login
            .value()
            .get()
            .and_then(Result::err)
            .map(|err| match err {
                ConsoleError::InvalidCredentials => "Wrong e-mail or password.".to_owned(),
                ConsoleError::TooManyAttempts {
                    retry_after_seconds,
                } => format!(
                    "Too many failed sign-ins. Try again in {} minutes.",
                    retry_after_seconds.div_ceil(60)
                ),
                other => format!("Sign-in failed: {other}."),
            })
    };

    view! {
        <Title text="Sign in · Engram console" />
        <main class="centered">
            <section class="card login-card">
                <h1 class="brand">"Engram"</h1>
                <p class="muted">"Sign in to the admin console."</p>
                <ActionForm action=login attr:class="stack" attr:data-testid="login-form">
                    <label>
                        <span>"E-mail"</span>
                        <input
                            type="email"
                            name="email"
                            required
                            autocomplete="username"
                            data-testid="login-email"
                        />
                    </label>
                    <label>
                        <span>"Password"</span>
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
                        "Sign in"
                    </button>
                </ActionForm>
            </section>
        </main>
    }
}
