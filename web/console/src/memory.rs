//! A memory's page: content, provenance (source, confidence, creator, scope), flags, version
//! history with word diffs and reasons, and the compliance actions: correct (with a reason),
//! mark immutable or put under legal hold (and lift), delete (reason and confirmation).

use crate::api::{CorrectMemory, DeleteMemory, SetMemoryFlag, load_memory};
use crate::i18n::{format_time, term, tr, trf};
use crate::model::role_name;
use crate::model::{
    ConsoleError, DiffPart, HistoryRow, IMPACT_DAYS, MemoryDetail, MemoryImpactSummary,
};
use crate::topbar::TopBar;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::Redirect, hooks::use_query_map};

#[component]
pub fn MemoryPage() -> impl IntoView {
    let query = use_query_map().get_untracked();
    let project_id = query.get("project").unwrap_or_default();
    let memory_id = query.get("id").unwrap_or_default();
    let correct = ServerAction::<CorrectMemory>::new();
    let set_flag = ServerAction::<SetMemoryFlag>::new();
    let delete = ServerAction::<DeleteMemory>::new();
    let (project_for_load, memory_for_load) = (project_id.clone(), memory_id.clone());
    let detail = Resource::new(
        move || (correct.version().get(), set_flag.version().get()),
        move |_| load_memory(project_for_load.clone(), memory_for_load.clone()),
    );
    // A flag's failure at the top; a correction's and a deletion's beside their buttons.
    let action_error = move || {
        set_flag.value().get().and_then(Result::err).map(|error| {
            view! { <p class="error" role="alert" data-testid="memory-error">{error.localized()}</p> }
        })
    };
    // After a correction the form is ready for the next one (its reason box empty).
    let correct_form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |_| {
        if let Some(Ok(())) = correct.value().get()
            && let Some(form) = correct_form.get()
        {
            form.reset();
        }
    });
    let back = format!("/console/memories?project={project_id}");
    let body = move || {
        Suspend::new(
            async move { detail_view(detail.await, correct, correct_form, set_flag, delete) },
        )
    };
    view! {
        <Title text=tr("Memory · Engram console") />
        <TopBar current="/console/memories" />
        <main class="content">
            <p><a href=back>{tr("← All memories")}</a></p>
            {action_error}
            <Transition fallback=|| view! { <p class="muted">{tr("Loading the memory…")}</p> }>{body}</Transition>
        </main>
    }
}

fn detail_view(
    detail: Result<MemoryDetail, ConsoleError>,
    correct: ServerAction<CorrectMemory>,
    correct_form: NodeRef<leptos::html::Form>,
    set_flag: ServerAction<SetMemoryFlag>,
    delete: ServerAction<DeleteMemory>,
) -> AnyView {
    let detail = match detail {
        Ok(detail) => detail,
        Err(ConsoleError::Unauthorized) => {
            return view! { <Redirect path="/console/login" /> }.into_any();
        }
        Err(ConsoleError::Forbidden { role }) => {
            return view! {
                <p class="notice" data-testid="memory-forbidden">
                    {trf("Your role ({}) cannot see memory content.", &[&role_name(&role)])}
                </p>
            }
            .into_any();
        }
        Err(ConsoleError::NotFound) => {
            return view! {
                <p class="notice" data-testid="memory-gone">
                    {tr("This memory does not exist (it may have been deleted or erased).")}
                </p>
            }
            .into_any();
        }
        Err(error) => {
            return view! { <p class="error" role="alert">{error.localized()}</p> }.into_any();
        }
    };
    let MemoryDetail {
        project_id,
        memory,
        confidence,
        created_at,
        occurred_at,
        created_by,
        metadata_json,
        expires_at,
        history,
        impact,
    } = detail;
    let memory_id = memory.id.clone();
    let shown_id = memory.id.clone();
    let metadata_for_form = metadata_json.clone();
    let (project_for_flags, memory_for_flags) = (project_id.clone(), memory_id.clone());
    let (project_for_visibility, memory_for_visibility) = (project_id.clone(), memory_id.clone());
    let (project_for_verify, memory_for_verify) = (project_id.clone(), memory_id.clone());
    let (project_for_impact, memory_for_impact) = (project_id.clone(), memory_id.clone());
    let flag_form = move |flag: &'static str,
                          label_on: &'static str,
                          label_off: &'static str,
                          is_on: bool| {
        let project_id = project_for_flags.clone();
        let memory_id = memory_for_flags.clone();
        view! {
            <ActionForm action=set_flag attr:class="stack" attr:data-testid=format!("flag-{flag}")>
                <input type="hidden" name="project_id" value=project_id />
                <input type="hidden" name="memory_id" value=memory_id />
                <input type="hidden" name="flag" value=flag />
                <input type="hidden" name="value" value=if is_on { "off" } else { "on" } />
                <input type="text" name="reason" required maxlength="500" placeholder=tr("Reason") data-testid=format!("flag-{flag}-reason") />
                <button type="submit" data-testid=format!("flag-{flag}-submit")>
                    {if is_on { label_off } else { label_on }}
                </button>
            </ActionForm>
        }
    };
    let immutable_form = flag_form(
        "immutable",
        tr("Mark immutable"),
        tr("Make editable again"),
        memory.immutable,
    );
    let hold_form = flag_form(
        "legal_hold",
        tr("Put under legal hold"),
        tr("Lift the legal hold"),
        memory.legal_hold,
    );
    // Private is its agent's alone: a memory of no agent can only be shared.
    let visibility_form =
        (memory.visibility == "private" || memory.agent_id.is_some()).then(|| {
            let (next, label) = if memory.visibility == "private" {
                ("shared", tr("Share with every agent"))
            } else {
                ("private", tr("Make private to its agent"))
            };
            setting_form(
                set_flag,
                (project_for_visibility, memory_for_visibility),
                ("visibility", next),
                label,
            )
        });
    // A reviewer's word that an agent's conclusion holds, or its withdrawal.
    let verify_form = {
        let (next, label) = if memory.verified_by.is_some() {
            ("off", tr("Withdraw the verification"))
        } else {
            ("on", tr("Verify: this conclusion holds"))
        };
        setting_form(
            set_flag,
            (project_for_verify, memory_for_verify),
            ("verified", next),
            label,
        )
    };
    let locked = memory.immutable || memory.legal_hold;
    let correct_section = if locked {
        view! { <p class="muted" data-testid="correct-locked">{tr("Immutable or held memories cannot be corrected.")}</p> }.into_any()
    } else {
        let (project_id, memory_id) = (project_id.clone(), memory_id.clone());
        let content = memory.content.clone();
        let metadata_for_form = metadata_for_form.clone();
        let categories_for_form = memory.categories.join(", ");
        let version_for_form = memory.version.to_string();
        view! {
            <ActionForm action=correct node_ref=correct_form attr:class="stack" attr:data-testid="correct-form">
                <input type="hidden" name="project_id" value=project_id />
                <input type="hidden" name="memory_id" value=memory_id />
                <input type="hidden" name="version" value=version_for_form />
                <input type="hidden" name="metadata_shown" value=metadata_for_form.clone() />
                <input type="hidden" name="categories_shown" value=categories_for_form.clone() />
                <textarea name="content" required data-testid="correct-content" translate="no">{content}</textarea>
                <label>
                    <span>{tr("Metadata (a JSON object)")}</span>
                    <textarea name="metadata" rows="3" data-testid="correct-metadata" translate="no">{metadata_for_form}</textarea>
                </label>
                <label>
                    <span>{tr("Categories (comma-separated)")}</span>
                    <input type="text" name="categories" value=categories_for_form data-testid="correct-categories" />
                </label>
                <input type="text" name="reason" required maxlength="500" placeholder=tr("Reason (required)") data-testid="correct-reason" />
                <button type="submit" data-testid="correct-submit">{tr("Save the correction")}</button>
                {move || correct.value().get().map(|result| match result {
                    Ok(()) => view! {
                        <p class="notice" role="status" data-testid="correct-done">{tr("Corrected: the new version and your reason are in the history below.")}</p>
                    }.into_any(),
                    Err(error) => view! {
                        <p class="error" role="alert" data-testid="correct-error">{error.localized()}</p>
                    }.into_any(),
                })}
            </ActionForm>
        }.into_any()
    };
    let reach = impact_sentence(&impact);
    let reach_for_correct = reach.clone();
    let delete_section = view! {
        <p class="notice" data-testid="delete-impact">{reach}</p>
        <ActionForm action=delete attr:class="stack" attr:data-testid="delete-form">
            <input type="hidden" name="project_id" value=project_id />
            <input type="hidden" name="memory_id" value=memory_id />
            <input type="text" name="reason" required maxlength="500" placeholder=tr("Reason (required)") data-testid="delete-reason" />
            <label class="checkbox">
                <input type="checkbox" name="confirm" value="yes" data-testid="delete-confirm" />
                <span>{tr("Delete this memory and its history for good")}</span>
            </label>
            <button type="submit" class="danger" data-testid="delete-submit">{tr("Delete")}</button>
            {move || delete.value().get().and_then(Result::err).map(|error| view! {
                <p class="error" role="alert" data-testid="delete-error">{error.localized()}</p>
            })}
        </ActionForm>
    };
    let state_class = format!("badge state-{}", memory.state);
    let kind_class = format!("badge kind-{}", memory.kind);
    view! {
        <h1 data-testid="memory-heading">{tr("Memory")}</h1>
        <p class="content" data-testid="memory-detail-content" translate="no">{memory.content.clone()}</p>
        <p>
            <span class=kind_class>{term(&memory.kind)}</span>" "
            <span class=state_class>{term(&memory.state)}</span>" "
            {memory.legal_hold.then(|| view! { <span class="badge state-held" data-testid="badge-held">{tr("legal hold")}</span> })}" "
            {memory.immutable.then(|| view! { <span class="badge" data-testid="badge-immutable">{tr("immutable")}</span> })}
        </p>
        <dl class="detail" data-testid="provenance">
            <dt>{tr("Id")}</dt><dd><code class="copyable" data-testid="memory-id" title=tr("Click to select")>{shown_id}</code></dd>
            <dt>{tr("Source")}</dt><dd data-testid="provenance-source">{term(&memory.source)}</dd>
            <dt>{tr("Confidence")}</dt><dd>{format!("{confidence:.2}")}</dd>
            <dt>{tr("Created by")}</dt><dd data-testid="provenance-creator" translate="no">{created_by.unwrap_or_else(|| "—".into())}</dd>
            <dt>{tr("Created")}</dt><dd>{format_time(&created_at)}</dd>
            <dt>{tr("Happened")}</dt><dd data-testid="provenance-occurred">{format_time(&occurred_at)}</dd>
            <dt>{tr("User")}</dt><dd translate="no">{memory.user_id.clone().unwrap_or_else(|| "—".into())}</dd>
            <dt>{tr("Agent")}</dt><dd translate="no">{memory.agent_id.clone().unwrap_or_else(|| "—".into())}</dd>
            <dt>{tr("Verified")}</dt><dd data-testid="memory-verified">{
                memory.verified_by.clone().map_or_else(|| tr("no: an agent's conclusion until someone vouches for it").to_string(), |by| trf("yes, by {}", &[&by]))
            }</dd>
            <dt>{tr("Visibility")}</dt><dd data-testid="memory-visibility">{
                match (memory.visibility.as_str(), &memory.shared_with) {
                    ("private", _) => tr("private: its agent only").to_string(),
                    (_, Some(team)) => trf("shared with the team {}: its agents and its own", &[team]),
                    _ => tr("shared: every agent of the project").to_string(),
                }
            }</dd>
            <dt>{tr("Session")}</dt><dd translate="no">{memory.session_id.clone().unwrap_or_else(|| "—".into())}</dd>
            <dt>{tr("Key")}</dt><dd translate="no">{memory.key.clone().unwrap_or_else(|| "—".into())}</dd>
            <dt>{tr("Categories")}</dt><dd translate="no">{if memory.categories.is_empty() { "—".to_string() } else { memory.categories.join(", ") }}</dd>
            <dt>{tr("Expires")}</dt><dd>{expires_at.map(|at| format_time(&at)).unwrap_or_else(|| tr("never").into())}</dd>
            <dt>{tr("Version")}</dt><dd data-testid="memory-version">{memory.version}</dd>
            <dt>{tr("Metadata")}</dt><dd><code>{metadata_json}</code></dd>
        </dl>
        <div class="actions">
            <section class="card">
                <h2>{tr("Correct")}</h2>
                <p class="notice" data-testid="correct-impact">{reach_for_correct}</p>
                {correct_section}
            </section>
            <section class="card">
                <h2>{tr("Flags")}</h2>
                {immutable_form}
                {hold_form}
                {visibility_form}
                {verify_form}
            </section>
            <section class="card">
                <h2>{tr("Delete")}</h2>
                {delete_section}
            </section>
        </div>
        {impact_view(&project_for_impact, &memory_for_impact, impact)}
        <h2>{tr("History")}</h2>
        <ol class="history" data-testid="history">
            {history.into_iter().rev().map(history_item).collect_view()}
        </ol>
    }
    .into_any()
}

/// A form that sets one of a memory's settings (`flag` to `value`) with a reason kept in its
/// history: its visibility, its verification.
fn setting_form(
    set_flag: ServerAction<SetMemoryFlag>,
    (project_id, memory_id): (String, String),
    (flag, value): (&'static str, &'static str),
    label: &'static str,
) -> impl IntoView {
    view! {
        <ActionForm action=set_flag attr:class="stack" attr:data-testid=format!("flag-{flag}")>
            <input type="hidden" name="project_id" value=project_id />
            <input type="hidden" name="memory_id" value=memory_id />
            <input type="hidden" name="flag" value=flag />
            <input type="hidden" name="value" value=value />
            <input type="text" name="reason" required maxlength="1024" placeholder=tr("Reason") data-testid=format!("flag-{flag}-reason") />
            <button type="submit" data-testid=format!("flag-{flag}-submit")>{label}</button>
        </ActionForm>
    }
}

/// What a correction or deletion would reach, said before it is confirmed.
fn impact_sentence(impact: &MemoryImpactSummary) -> String {
    let runs = match impact.runs {
        1 => trf("{} run", &[&1]),
        count => trf("{} runs", &[&count]),
    };
    let searches = match impact.recalls {
        1 => trf("{} search", &[&1]),
        count => trf("{} searches", &[&count]),
    };
    let contexts = match impact.contexts {
        1 => trf("{} context", &[&1]),
        count => trf("{} contexts", &[&count]),
    };
    trf(
        "In the last {} days this memory was injected into or recalled for {}, returned by {} and packed into {}.",
        &[&IMPACT_DAYS, &runs, &searches, &contexts],
    )
}

/// The latest uses of the memory, each linking to its run or recall.
fn impact_view(project_id: &str, memory_id: &str, impact: MemoryImpactSummary) -> AnyView {
    let all_recalls = format!("/console/recalls?project={project_id}&memory_id={memory_id}");
    let rows = impact
        .uses
        .into_iter()
        .map(|used| {
            let link = match (&used.run_id, &used.recall_id) {
                (Some(run_id), _) => {
                    let href = format!("/console/runs?project={project_id}&run={run_id}");
                    view! { <a href=href data-testid="impact-run-link">{tr("run")}</a> }.into_any()
                }
                (None, Some(recall_id)) => {
                    let href = format!("/console/recall?project={project_id}&recall={recall_id}");
                    view! { <a href=href>{tr("recall")}</a> }.into_any()
                }
                (None, None) => "—".into_any(),
            };
            view! {
                <tr data-testid="impact-row" data-kind=used.kind.clone()>
                    <td>{format_time(&used.at)}</td>
                    <td>{term(&used.kind)}</td>
                    <td>{format!("v{}", used.version)}</td>
                    <td translate="no">{used.user_id.clone().unwrap_or_else(|| "—".into())}</td>
                    <td>{link}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h2>{tr("Used by")}</h2>
        <p data-testid="impact-counts">
            {trf(
                "Last {} days: {} searches, {} contexts, {} runs. ",
                &[&IMPACT_DAYS, &impact.recalls, &impact.contexts, &impact.runs],
            )}
            <a href=all_recalls data-testid="impact-recalls-link">{tr("Every recall that returned it")}</a>
        </p>
        <table class="memories" data-testid="impact-table">
            <thead><tr><th>{tr("When")}</th><th>{tr("Use")}</th><th>{tr("Version")}</th><th>{tr("End-user")}</th><th>""</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

fn history_item(entry: HistoryRow) -> impl IntoView {
    let HistoryRow {
        version,
        event,
        actor,
        reason,
        at,
        diff,
        ..
    } = entry;
    view! {
        <li data-testid="history-entry" data-version=version.to_string() data-event=event.clone()>
            <strong>{format!("v{version} ")}{term(&event)}</strong>
            <span class="muted">" · "{format_time(&at)}" · "<span translate="no">{actor}</span></span>
            {reason.map(|reason| view! { <div data-testid="history-reason">{tr("Reason: ")}<span translate="no">{reason}</span></div> })}
            <div class="diff" data-testid="history-diff" translate="no">{diff.into_iter().map(diff_part).collect_view()}</div>
        </li>
    }
}

fn diff_part(part: DiffPart) -> impl IntoView {
    match part.change.as_str() {
        "added" => view! { <ins class="diff-added" data-testid="diff-added">{part.text}</ins>" " }
            .into_any(),
        "removed" => {
            view! { <del class="diff-removed" data-testid="diff-removed">{part.text}</del>" " }
                .into_any()
        }
        _ => view! { <span>{part.text}</span>" " }.into_any(),
    }
}
