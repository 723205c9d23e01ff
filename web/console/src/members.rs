//! The members page (owners and admins): who has access to the console with which role,
//! invitations (the link is shown once), role changes and removals.

use crate::api::{ChangeMemberRole, InviteMember, RemoveMember, RevokeInvitation, load_members};
use crate::confirm::Confirm;
use crate::i18n::{format_time, tr, trf};
use crate::model::role_name;
use crate::model::{ConsoleError, InvitationRow, MemberListing, MemberRow, NewInvitation};
use crate::topbar::TopBar;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::Redirect;

#[component]
pub fn MembersPage() -> impl IntoView {
    let invite = ServerAction::<InviteMember>::new();
    let revoke = ServerAction::<RevokeInvitation>::new();
    let change_role = ServerAction::<ChangeMemberRole>::new();
    let remove = ServerAction::<RemoveMember>::new();
    let members = Resource::new(
        move || {
            (
                invite.version().get(),
                revoke.version().get(),
                change_role.version().get(),
                remove.version().get(),
            )
        },
        move |_| load_members(),
    );

    let new_invitation = move || {
        invite.value().get().and_then(Result::ok).map(
            |NewInvitation {
                 invitation,
                 link_path,
             }| {
                view! {
                    <section class="card secret" data-testid="new-invitation">
                        <p>
                            {tr("Send this link to ")}<strong translate="no">{invitation.email}</strong>
                            {trf(" ({}) — it is shown only once and works for 7 days:", &[&role_name(&invitation.role)])}
                        </p>
                        <code data-testid="invitation-link">{link_path}</code>
                    </section>
                }
            },
        )
    };
    let action_error = move || {
        let errors = [
            invite.value().get().and_then(Result::err),
            revoke.value().get().and_then(Result::err),
            change_role.value().get().and_then(Result::err),
            remove.value().get().and_then(Result::err),
        ];
        errors.into_iter().flatten().next().map(|error| {
            view! { <p class="error" role="alert" data-testid="members-error">{error.localized()}</p> }
        })
    };
    // What the last action did, beside the list it changed.
    // The action that finished last is the one reported.
    let last_done = RwSignal::new(None::<&'static str>);
    Effect::new(move |_| {
        if let Some(Ok(())) = remove.value().get() {
            last_done.set(Some(tr(
                "The member was removed; their sessions have ended.",
            )));
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(())) = change_role.value().get() {
            last_done.set(Some(tr("The role was changed; it applies at once.")));
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(())) = revoke.value().get() {
            last_done.set(Some(tr(
                "The invitation was withdrawn; its link no longer works.",
            )));
        }
    });
    let done = move || {
        last_done.get().map(
            |text| view! { <p class="notice" role="status" data-testid="members-done">{text}</p> },
        )
    };
    let body = move || {
        Suspend::new(
            async move { members_view(members.await, invite, revoke, change_role, remove) },
        )
    };

    view! {
        <Title text=tr("Members · Engram console") />
        <TopBar current="/console/members" />
        <main class="content">
            <h1>{tr("Members")}</h1>
            {action_error}
            {done}
            {new_invitation}
            <Transition fallback=|| view! { <p class="muted">{tr("Loading members…")}</p> }>{body}</Transition>
        </main>
    }
}

fn members_view(
    listing: Result<MemberListing, ConsoleError>,
    invite: ServerAction<InviteMember>,
    revoke: ServerAction<RevokeInvitation>,
    change_role: ServerAction<ChangeMemberRole>,
    remove: ServerAction<RemoveMember>,
) -> AnyView {
    let listing = match listing {
        Ok(listing) => listing,
        Err(ConsoleError::Unauthorized) => {
            return view! { <Redirect path="/console/login" /> }.into_any();
        }
        Err(ConsoleError::Forbidden { role }) => {
            return view! {
                <p class="notice" data-testid="members-forbidden">
                    {trf("Your role ({}) cannot manage members: ask an owner or admin.", &[&role_name(&role)])}
                </p>
            }
            .into_any();
        }
        Err(error) => {
            return view! { <p class="error" role="alert" data-testid="members-error">{error.localized()}</p> }
                .into_any();
        }
    };
    let MemberListing {
        members,
        invitations,
        assignable_roles,
    } = listing;
    let invite_roles = assignable_roles.clone();
    view! {
        <ActionForm action=invite attr:class="filters" attr:data-testid="invite-form">
            <label class="grow">
                <span>{tr("E-mail")}</span>
                <input type="email" name="email" required maxlength="320" data-testid="invite-email" />
            </label>
            <label>
                <span>{tr("Role")}</span>
                <select name="role" data-testid="invite-role">
                    {role_options(&invite_roles, "analyst")}
                </select>
            </label>
            <button type="submit" data-testid="invite-submit">{tr("Invite")}</button>
        </ActionForm>
        <div class="table-wrap">
            <table class="memories" data-testid="members-table">
                <thead>
                    <tr>
                        <th>{tr("E-mail")}</th>
                        <th>{tr("Role")}</th>
                        <th>{tr("Joined")}</th>
                        <th></th>
                    </tr>
                </thead>
                <tbody>
                    {members
                        .into_iter()
                        .map(|member| member_row(member, &assignable_roles, change_role, remove))
                        .collect_view()}
                </tbody>
            </table>
        </div>
        {(!invitations.is_empty())
            .then(|| {
                view! {
                    <h2>{tr("Pending invitations")}</h2>
                    <div class="table-wrap">
                        <table class="memories" data-testid="invitations-table">
                            <thead>
                                <tr>
                                    <th>{tr("E-mail")}</th>
                                    <th>{tr("Role")}</th>
                                    <th>{tr("Expires")}</th>
                                    <th></th>
                                </tr>
                            </thead>
                            <tbody>
                                {invitations
                                    .into_iter()
                                    .map(|invitation| invitation_row(invitation, revoke))
                                    .collect_view()}
                            </tbody>
                        </table>
                    </div>
                }
            })}
    }
    .into_any()
}

fn role_options(roles: &[String], selected: &str) -> impl IntoView + use<> {
    roles
        .iter()
        .map(|role| {
            let is_selected = role == selected;
            view! { <option value=role.clone() selected=is_selected>{role_name(role)}</option> }
        })
        .collect_view()
}

fn member_row(
    member: MemberRow,
    assignable_roles: &[String],
    change_role: ServerAction<ChangeMemberRole>,
    remove: ServerAction<RemoveMember>,
) -> impl IntoView {
    let MemberRow {
        id,
        email,
        role,
        joined_at,
        is_you,
    } = member;
    // Only roles this account may hand out, and only for members it may manage.
    let manageable = !is_you && assignable_roles.contains(&role);
    let options = role_options(assignable_roles, &role);
    let email_attribute = email.clone();
    let role_attribute = role.clone();
    let id_for_remove = id.clone();
    let remove_question = trf(
        "Remove {} from the organization? Their sessions end at once; an invitation can bring them back.",
        &[&email],
    );
    view! {
        <tr data-testid="member-row" data-email=email_attribute data-role=role_attribute>
            <td><span translate="no">{email}</span>{is_you.then(|| view! { <span class="muted">{tr(" (you)")}</span> })}</td>
            <td>
                {if manageable {
                    view! {
                        <ActionForm action=change_role attr:class="inline">
                            <input type="hidden" name="member_id" value=id />
                            <select name="role" data-testid="member-role">{options}</select>
                            <button type="submit" class="ghost" data-testid="change-role">{tr("Change")}</button>
                        </ActionForm>
                    }
                        .into_any()
                } else {
                    view! { <span class="badge">{role_name(&role)}</span> }.into_any()
                }}
            </td>
            <td class="nowrap">{format_time(&joined_at)}</td>
            <td class="nowrap">
                {manageable
                    .then(|| {
                        view! {
                            <Confirm label=tr("Remove…") question=remove_question test_id="remove-member-ask">
                                <ActionForm action=remove attr:class="inline">
                                    <input type="hidden" name="member_id" value=id_for_remove />
                                    <button type="submit" class="danger" data-testid="remove-member">{tr("Remove the member")}</button>
                                </ActionForm>
                            </Confirm>
                        }
                    })}
            </td>
        </tr>
    }
}

fn invitation_row(
    invitation: InvitationRow,
    revoke: ServerAction<RevokeInvitation>,
) -> impl IntoView {
    let InvitationRow {
        id,
        email,
        role,
        expires_at,
    } = invitation;
    let email_attribute = email.clone();
    view! {
        <tr data-testid="invitation-row" data-email=email_attribute>
            <td translate="no">{email}</td>
            <td><span class="badge">{role_name(&role)}</span></td>
            <td class="nowrap">{format_time(&expires_at)}</td>
            <td>
                <ActionForm action=revoke attr:class="inline">
                    <input type="hidden" name="invitation_id" value=id />
                    <button type="submit" class="ghost" data-testid="revoke-invitation">{tr("Withdraw")}</button>
                </ActionForm>
            </td>
        </tr>
    }
}
