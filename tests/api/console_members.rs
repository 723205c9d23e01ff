//! Console members and invitations through the console's own API: who may invite, re-role
//! and remove whom (owners and admins; admins never touch owners; nobody changes their own
//! membership; an organization keeps an owner), single-use invitation links with a password
//! policy, removal that ends sessions at once, and the audit trail with address and user agent.

use engram_tests::{TestServer, run_engram};
use serde_json::Value;

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent("engram-members-test/1.0")
        .build()
        .unwrap()
}

fn session_cookies(response: &reqwest::Response) -> String {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|value| value.split(';').next().map(str::to_string))
        .filter(|pair| !pair.ends_with('='))
        .collect::<Vec<_>>()
        .join("; ")
}

async fn login(server: &TestServer, email: &str, password: &str) -> String {
    let response = client()
        .post(format!("{}/console/api/login", server.base_url))
        .form(&[("email", email), ("password", password)])
        .send()
        .await
        .unwrap();
    let cookies = session_cookies(&response);
    assert!(
        cookies.contains("engram_console="),
        "login as {email} failed: {}",
        response.status()
    );
    cookies
}

/// (status, JSON body) of a console server function called the way the browser's fetch does.
async fn call(
    server: &TestServer,
    cookie: &str,
    function: &str,
    form: &[(&str, &str)],
) -> (u16, Value, String) {
    let response = client()
        .post(format!("{}/console/api/{function}", server.base_url))
        .header("Cookie", cookie)
        .form(form)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let cookies = session_cookies(&response);
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (status, body, cookies)
}

fn create_member(server: &TestServer, email: &str, role: &str) -> (String, String) {
    let created = server.create_member(email, role);
    (
        created["email"].as_str().unwrap().to_string(),
        created["password"].as_str().unwrap().to_string(),
    )
}

fn member_id(listing: &Value, email: &str) -> String {
    listing["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|member| member["email"] == email)
        .unwrap_or_else(|| panic!("{email} is not a member: {listing}"))["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn token_of(link_path: &str) -> String {
    assert!(
        link_path.starts_with("http://127.0.0.1:"),
        "an absolute link: {link_path}"
    );
    link_path
        .split_once("/console/invite?token=")
        .unwrap_or_else(|| panic!("unexpected link {link_path}"))
        .1
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_and_admins_manage_members_within_their_rights() {
    let server = TestServer::spawn().await.unwrap();
    let owner = login(
        &server,
        &server.bootstrap.console_email,
        &server.bootstrap.console_password,
    )
    .await;
    let (admin_email, admin_password) = create_member(&server, "admin@example.com", "admin");
    let (developer_email, developer_password) =
        create_member(&server, "developer@example.com", "developer");
    let admin = login(&server, &admin_email, &admin_password).await;
    let developer = login(&server, &developer_email, &developer_password).await;

    // Only owners and admins see the members page's data.
    let (status, listing, _) = call(&server, &owner, "members", &[]).await;
    assert_eq!(status, 200, "{listing}");
    assert_eq!(listing["members"].as_array().unwrap().len(), 3);
    assert_eq!(listing["assignable_roles"].as_array().unwrap().len(), 5);
    assert!(
        !listing.to_string().contains("argon2"),
        "no password hashes"
    );
    let (status, admin_listing, _) = call(&server, &admin, "members", &[]).await;
    assert_eq!(status, 200);
    assert!(
        !admin_listing["assignable_roles"]
            .as_array()
            .unwrap()
            .iter()
            .any(|role| role == "owner"),
        "admins cannot hand out owner: {admin_listing}"
    );
    let (status, body, _) = call(&server, &developer, "members", &[]).await;
    assert_eq!(status, 403, "{body}");
    let (status, _, _) = call(
        &server,
        &developer,
        "invite_member",
        &[("email", "x@example.com"), ("role", "analyst")],
    )
    .await;
    assert_eq!(status, 403);

    // An admin cannot invite an owner, nor touch the owner; a malformed address is a 400.
    let (status, body, _) = call(
        &server,
        &admin,
        "invite_member",
        &[("email", "new-owner@example.com"), ("role", "owner")],
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, body, _) = call(
        &server,
        &admin,
        "invite_member",
        &[("email", "not an address"), ("role", "analyst")],
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, body, _) = call(
        &server,
        &admin,
        "invite_member",
        &[("email", "someone@example.com"), ("role", "superuser")],
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let owner_id = member_id(&listing, &server.bootstrap.console_email);
    let (status, _, _) = call(
        &server,
        &admin,
        "change_member_role",
        &[("member_id", owner_id.as_str()), ("role", "analyst")],
    )
    .await;
    assert_eq!(status, 403, "admins cannot demote owners");
    let (status, _, _) = call(
        &server,
        &admin,
        "remove_member",
        &[("member_id", owner_id.as_str())],
    )
    .await;
    assert_eq!(status, 403, "admins cannot remove owners");
    // Nobody changes or removes their own membership (the last owner stays).
    let (status, body, _) = call(
        &server,
        &owner,
        "change_member_role",
        &[("member_id", owner_id.as_str()), ("role", "analyst")],
    )
    .await;
    assert_eq!(status, 409, "{body}");
    let (status, _, _) = call(
        &server,
        &owner,
        "remove_member",
        &[("member_id", owner_id.as_str())],
    )
    .await;
    assert_eq!(status, 409);

    // An admin invites a compliance officer; the link works once, with a real password.
    let (status, invited, _) = call(
        &server,
        &admin,
        "invite_member",
        &[("email", "Officer@Example.com"), ("role", "compliance")],
    )
    .await;
    assert_eq!(status, 200, "{invited}");
    assert_eq!(invited["invitation"]["email"], "officer@example.com");
    let token = token_of(invited["link_path"].as_str().unwrap());
    let (status, preview, _) = call(&server, "", "invitation", &[("token", token.as_str())]).await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["role"], "compliance");
    for (password, again, expected) in [
        ("short", "short", 400),
        ("a long enough password", "another long password", 400),
    ] {
        let (status, body, cookies) = call(
            &server,
            "",
            "accept_invitation",
            &[
                ("token", token.as_str()),
                ("password", password),
                ("password_again", again),
            ],
        )
        .await;
        assert_eq!(status, expected, "{body}");
        assert!(cookies.is_empty(), "no session for a refused acceptance");
    }
    let officer_password = "correct horse battery staple";
    let (status, body, officer) = call(
        &server,
        "",
        "accept_invitation",
        &[
            ("token", token.as_str()),
            ("password", officer_password),
            ("password_again", officer_password),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(officer.contains("engram_console="), "signed in: {officer}");
    let (status, session, _) = call(&server, &officer, "session", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(session["account"]["role"], "compliance");
    // The same link never works twice, and the new password signs in.
    let (status, _, _) = call(
        &server,
        "",
        "accept_invitation",
        &[
            ("token", token.as_str()),
            ("password", officer_password),
            ("password_again", officer_password),
        ],
    )
    .await;
    assert_eq!(status, 404);
    let (status, _, _) = call(&server, "", "invitation", &[("token", token.as_str())]).await;
    assert_eq!(status, 404);
    login(&server, "officer@example.com", officer_password).await;

    // A withdrawn invitation's link is dead.
    let (_, withdrawn, _) = call(
        &server,
        &owner,
        "invite_member",
        &[("email", "temp@example.com"), ("role", "analyst")],
    )
    .await;
    let (_, listing, _) = call(&server, &owner, "members", &[]).await;
    let invitation_id = listing["invitations"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, _, _) = call(
        &server,
        &owner,
        "revoke_invitation",
        &[("invitation_id", invitation_id.as_str())],
    )
    .await;
    assert_eq!(status, 200);
    let withdrawn_token = token_of(withdrawn["link_path"].as_str().unwrap());
    let (status, _, _) = call(
        &server,
        "",
        "invitation",
        &[("token", withdrawn_token.as_str())],
    )
    .await;
    assert_eq!(status, 404);

    // The admin re-roles the officer, then removes them: their session ends at once.
    let (_, listing, _) = call(&server, &owner, "members", &[]).await;
    let officer_id = member_id(&listing, "officer@example.com");
    let (status, _, _) = call(
        &server,
        &admin,
        "change_member_role",
        &[("member_id", officer_id.as_str()), ("role", "analyst")],
    )
    .await;
    assert_eq!(status, 200);
    let (_, session, _) = call(&server, &officer, "session", &[]).await;
    assert_eq!(
        session["account"]["role"], "analyst",
        "takes effect at once"
    );
    let (status, _, _) = call(
        &server,
        &admin,
        "remove_member",
        &[("member_id", officer_id.as_str())],
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, _) = call(&server, &officer, "session", &[]).await;
    assert_eq!(status, 401, "a removed member's session is over");

    // Another organization's owner cannot touch this organization's members.
    let output = run_engram(
        &[
            "admin",
            "create-organization",
            "--data-dir",
            &server.data_dir.display().to_string(),
            "--name",
            "elsewhere",
            "--owner-email",
            "owner@elsewhere.example",
        ],
        &[],
    );
    assert!(output.status.success());
    let created: Value = serde_json::from_slice(&output.stdout).unwrap();
    let stranger = login(
        &server,
        "owner@elsewhere.example",
        created["console_password"].as_str().unwrap(),
    )
    .await;
    let admin_id = member_id(&listing, &admin_email);
    for (function, form) in [
        (
            "change_member_role",
            vec![("member_id", admin_id.as_str()), ("role", "analyst")],
        ),
        ("remove_member", vec![("member_id", admin_id.as_str())]),
    ] {
        let (status, _, _) = call(&server, &stranger, function, &form).await;
        assert_eq!(status, 404, "{function} across organizations");
    }
    let (_, stranger_listing, _) = call(&server, &stranger, "members", &[]).await;
    assert_eq!(stranger_listing["members"].as_array().unwrap().len(), 1);
    assert!(!stranger_listing.to_string().contains("example.com"));

    // Every change is in the organization's audit log, with the address and user agent it
    // came from, and never an e-mail address.
    let (status, audit, _) = call(
        &server,
        &owner,
        "audit",
        &[("action", "console.member_invited")],
    )
    .await;
    assert_eq!(status, 200, "{audit}");
    let events = audit["events"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{audit}");
    assert_eq!(events[0]["ip"], "127.0.0.1");
    assert_eq!(events[0]["user_agent"], "engram-members-test/1.0");
    assert_eq!(events[0]["actor_type"], "console_account");
    // The events themselves carry no e-mail address; the console names the member beside
    // the id when it shows them (resolved as it renders, never stored in the chain).
    let mut stored = audit.clone();
    for event in stored["events"].as_array_mut().unwrap() {
        let name = event
            .as_object_mut()
            .unwrap()
            .remove("actor_name")
            .unwrap_or_default();
        assert!(
            name.as_str().is_some_and(|name| name.contains('@')),
            "{event}"
        );
    }
    assert!(
        !stored.to_string().contains("@example.com"),
        "no e-mail addresses: {stored}"
    );
    for action in [
        "console.invitation_accepted",
        "console.invitation_revoked",
        "console.member_role_changed",
        "console.member_removed",
    ] {
        let (_, audit, _) = call(&server, &owner, "audit", &[("action", action)]).await;
        assert_eq!(
            audit["events"].as_array().map(Vec::len),
            Some(1),
            "{action}: {audit}"
        );
    }
    let (_, audit, _) = call(&server, &owner, "audit", &[]).await;
    assert_eq!(audit["chain"]["verified"], true, "{audit}");
}

/// Each member chooses the console's language for their own account (any role may); a
/// language the console does not speak is a 400 that changes nothing; pages follow the
/// account's choice over the browser's `Accept-Language`, which decides only for those who
/// never chose (and on the sign-in page).
#[tokio::test]
async fn each_member_chooses_their_own_console_language_over_the_browsers() {
    let server = TestServer::spawn().await.unwrap();
    let owner = login(
        &server,
        &server.bootstrap.console_email,
        &server.bootstrap.console_password,
    )
    .await;
    let (analyst_email, analyst_password) =
        create_member(&server, "analyst@example.com", "analyst");
    let analyst = login(&server, &analyst_email, &analyst_password).await;
    let language_of = |cookie: String| {
        let server = &server;
        async move {
            let (status, session, _) = call(server, &cookie, "session", &[]).await;
            assert_eq!(status, 200, "{session}");
            session["account"]["language"].clone()
        }
    };
    let page_lang = |cookie: Option<String>, path: &'static str, accept: &'static str| {
        let base = server.base_url.clone();
        async move {
            let mut request = client()
                .get(format!("{base}{path}"))
                .header("Accept-Language", accept);
            if let Some(cookie) = cookie {
                request = request.header("Cookie", cookie);
            }
            let page = request.send().await.unwrap().text().await.unwrap();
            let start = page
                .find("<html lang=\"")
                .expect("the page names its language")
                + 12;
            page[start..start + page[start..].find('"').unwrap()].to_string()
        }
    };

    assert_eq!(language_of(owner.clone()).await, Value::Null);
    assert_eq!(
        page_lang(None, "/console/login", "zh-CN,zh;q=0.9").await,
        "zh-CN"
    );
    assert_eq!(page_lang(None, "/console/login", "en-US,en").await, "en");
    assert_eq!(
        page_lang(Some(owner.clone()), "/console/memories", "zh-CN").await,
        "zh-CN",
        "without a choice the browser decides"
    );

    let (status, refused, _) = call(&server, &analyst, "language", &[("language", "fr")]).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused.to_string().contains("language"), "{refused}");
    assert_eq!(
        language_of(analyst.clone()).await,
        Value::Null,
        "nothing saved"
    );

    let (status, body, _) = call(&server, &analyst, "language", &[("language", "zh")]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(language_of(analyst.clone()).await, "zh");
    assert_eq!(
        language_of(owner.clone()).await,
        Value::Null,
        "one member's choice is their own"
    );
    assert_eq!(
        page_lang(Some(analyst.clone()), "/console/recall", "en-US").await,
        "zh-CN",
        "the account's choice wins over the browser's"
    );

    let (status, body, _) = call(&server, &owner, "language", &[("language", "en")]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        page_lang(Some(owner.clone()), "/console/memories", "zh-CN").await,
        "en"
    );
}
