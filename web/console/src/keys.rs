//! The API keys page: the project's keys (never their secrets), a form that creates one and
//! shows its secret once, and revoke / roll buttons per key.

use crate::api::{CreateKey, RevokeKey, RollKey, load_keys};
use crate::confirm::Confirm;
use crate::i18n::{format_time, term, tr, trf};
use crate::model::{ConsoleError, KEY_SCOPES, KeyListing, KeyRow, NewKeySecret};
use crate::topbar::TopBar;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::Redirect, hooks::use_query_map};

#[component]
pub fn KeysPage() -> impl IntoView {
    let project = use_query_map()
        .get_untracked()
        .get("project")
        .filter(|project| !project.trim().is_empty())
        .unwrap_or_default();
    let create = ServerAction::<CreateKey>::new();
    let revoke = ServerAction::<RevokeKey>::new();
    let roll = ServerAction::<RollKey>::new();
    let project_for_keys = project.clone();
    let keys = Resource::new(
        move || {
            (
                create.version().get(),
                revoke.version().get(),
                roll.version().get(),
            )
        },
        move |_| {
            let project = project_for_keys.clone();
            load_keys((!project.is_empty()).then_some(project))
        },
    );

    // The secret of the key just created or rolled; gone with the next page load.
    let latest = RwSignal::new(None::<NewKeySecret>);
    Effect::new(move |_| {
        if let Some(Ok(created)) = create.value().get() {
            latest.set(Some(created));
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(rolled)) = roll.value().get() {
            latest.set(Some(rolled));
        }
    });
    let new_secret = move || {
        latest.get().map(|NewKeySecret { key, secret }| {
            view! {
                <section class="card secret" data-testid="new-key">
                    <p>
                        {tr("The secret of ")}<strong>{key.label}</strong>
                        {tr(" — copy it now, it is shown only once:")}
                    </p>
                    <code data-testid="new-key-secret">{secret}</code>
                </section>
            }
        })
    };
    // The action that finished last is the one reported.
    let last_done = RwSignal::new(None::<&'static str>);
    Effect::new(move |_| {
        if let Some(Ok(())) = revoke.value().get() {
            last_done.set(Some(tr("The key was revoked: it no longer works.")));
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(_)) = roll.value().get() {
            last_done.set(Some(tr("The key was rolled: its new secret is below.")));
        }
    });
    let done = move || {
        last_done.get().map(
            |text| view! { <p class="notice" role="status" data-testid="keys-done">{text}</p> },
        )
    };
    // After a key is made, the form is ready for the next one.
    let create_form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |_| {
        if let Some(Ok(_)) = create.value().get()
            && let Some(form) = create_form.get()
        {
            form.reset();
        }
    });
    let action_error = move || {
        let errors = [
            create.value().get().and_then(Result::err),
            revoke.value().get().and_then(Result::err),
            roll.value().get().and_then(Result::err),
        ];
        errors.into_iter().flatten().next().map(|error| {
            view! { <p class="error" role="alert" data-testid="keys-error">{error.localized()}</p> }
        })
    };
    let project_field = project.clone();
    let table = move || {
        let project = project.clone();
        Suspend::new(async move { keys_view(keys.await, project, revoke, roll) })
    };

    view! {
        <Title text=tr("API keys · Engram console") />
        <TopBar current="/console/keys" />
        <main class="content">
            <h1>{tr("API keys")}</h1>
            <ActionForm action=create node_ref=create_form attr:class="filters" attr:data-testid="create-key-form">
                <input type="hidden" name="project_id" value=project_field />
                <label class="grow">
                    <span>{tr("Label")}</span>
                    <input type="text" name="label" required maxlength="100" data-testid="key-label" />
                </label>
                {KEY_SCOPES
                    .iter()
                    .zip(["read", "write", "delete", "verify", "admin"])
                    .map(|(scope, field)| {
                        view! {
                            <label class="checkbox">
                                <input type="checkbox" name=field data-testid=format!("scope-{field}") />
                                <span translate="no">{*scope}</span>
                            </label>
                        }
                    })
                    .collect_view()}
                <label>
                    <span>{tr("Environment")}</span>
                    <select name="environment" data-testid="key-environment">
                        <option value="live" selected=true>{tr("live")}</option>
                        <option value="test">{tr("test")}</option>
                    </select>
                </label>
                <label>
                    <span>{tr("Works until (UTC, optional)")}</span>
                    <input type="date" name="expires_on" data-testid="key-expires" />
                </label>
                <label>
                    <span>{tr("Agents (optional, comma-separated: the key acts only as them)")}</span>
                    <input type="text" name="agents" placeholder=tr("every agent") data-testid="key-agents-input" />
                </label>
                <button type="submit" data-testid="create-key">{tr("Create key")}</button>
            </ActionForm>
            {action_error}
            {done}
            {new_secret}
            <Transition fallback=|| view! { <p class="muted">{tr("Loading keys…")}</p> }>{table}</Transition>
        </main>
    }
}

fn keys_view(
    listing: Result<KeyListing, ConsoleError>,
    project: String,
    revoke: ServerAction<RevokeKey>,
    roll: ServerAction<RollKey>,
) -> AnyView {
    let listing = match listing {
        Ok(listing) => listing,
        Err(ConsoleError::Unauthorized) => {
            return view! { <Redirect path="/console/login" /> }.into_any();
        }
        Err(error) => {
            return view! { <p class="error" role="alert" data-testid="keys-error">{error.localized()}</p> }
                .into_any();
        }
    };
    if listing.keys.is_empty() {
        return view! { <p class="empty">{tr("No keys yet.")}</p> }.into_any();
    }
    view! {
        <div class="table-wrap">
            <table class="memories" data-testid="keys-table">
                <thead>
                    <tr>
                        <th>{tr("Label")}</th>
                        <th>{tr("Key")}</th>
                        <th>{tr("Scopes")}</th>
                        <th>{tr("State")}</th>
                        <th>{tr("Expires")}</th>
                        <th>{tr("Last used")}</th>
                        <th>{tr("Made by")}</th>
                        <th>{tr("Agents")}</th>
                        <th></th>
                    </tr>
                </thead>
                <tbody>
                    {listing
                        .keys
                        .into_iter()
                        .map(|key| key_row(key, project.clone(), revoke, roll))
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}

fn key_row(
    key: KeyRow,
    project: String,
    revoke: ServerAction<RevokeKey>,
    roll: ServerAction<RollKey>,
) -> impl IntoView {
    let KeyRow {
        id: key_id,
        label,
        prefix,
        scopes,
        state,
        expires_at,
        last_used_at,
        created_by,
        manageable,
        agents,
        ..
    } = key;
    let active = state == "active" && manageable;
    let project_for_roll = project.clone();
    let key_id_for_roll = key_id.clone();
    let label_attribute = label.clone();
    let roll_question = trf(
        "Roll the key “{}”? A new secret is made; the old one keeps working for the overlap window, then stops.",
        &[&label],
    );
    let revoke_question = trf(
        "Revoke the key “{}”? Every client using it is refused at once.",
        &[&label],
    );
    let state_attribute = state.clone();
    let state_class = format!("badge state-{state}");
    view! {
        <tr data-testid="key-row" data-label=label_attribute data-state=state_attribute>
            <td translate="no">{label}</td>
            <td translate="no"><code>{prefix}"…"</code></td>
            <td data-testid="key-scopes" translate="no">{scopes.join(" ")}</td>
            <td><span class=state_class>{term(&state)}</span></td>
            <td class="nowrap">{expires_at.map(|at| format_time(&at)).unwrap_or_else(|| tr("never").into())}</td>
            <td class="nowrap">{last_used_at.map(|at| format_time(&at)).unwrap_or_else(|| tr("never").into())}</td>
            <td class="nowrap" data-testid="key-maker">{created_by.map(|maker| view! { <span translate="no">{maker}</span> }.into_any()).unwrap_or_else(|| tr("unknown").into_any())}</td>
            <td data-testid="key-agents">
                {if agents.is_empty() { tr("every agent").into_any() } else { view! { <span translate="no">{agents.join(", ")}</span> }.into_any() }}
            </td>
            <td class="nowrap">
                {active
                    .then(|| {
                        view! {
                            <Confirm label=tr("Roll…") question=roll_question test_id="roll-key-ask">
                                <ActionForm action=roll attr:class="inline">
                                    <input type="hidden" name="project_id" value=project_for_roll />
                                    <input type="hidden" name="key_id" value=key_id_for_roll />
                                    <button type="submit" class="danger" data-testid="roll-key">{tr("Roll the key")}</button>
                                </ActionForm>
                            </Confirm>
                            <Confirm label=tr("Revoke…") question=revoke_question test_id="revoke-key-ask">
                                <ActionForm action=revoke attr:class="inline">
                                    <input type="hidden" name="project_id" value=project />
                                    <input type="hidden" name="key_id" value=key_id />
                                    <button type="submit" class="danger" data-testid="revoke-key">{tr("Revoke the key")}</button>
                                </ActionForm>
                            </Confirm>
                        }
                    })}
            </td>
        </tr>
    }
}
