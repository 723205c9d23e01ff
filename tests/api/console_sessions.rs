//! Console sessions over HTTP: login sets a short-lived access cookie and a refresh cookie;
//! a missing or expired access token is renewed by rotating the refresh token; a replayed
//! refresh token ends the session; logout ends it at once; cross-origin posts are refused;
//! an access token with an unknown key id is refused.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use engram_tests::TestServer;
use std::collections::HashMap;

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `name → value` of the response's Set-Cookie headers (a cleared cookie has an empty value).
fn set_cookies(response: &reqwest::Response) -> HashMap<String, String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|value| value.split(';').next())
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (name.trim().to_string(), value.trim().to_string()))
        .collect()
}

async fn login(server: &TestServer) -> (String, String) {
    let response = client()
        .post(format!("{}/console/api/login", server.base_url))
        .form(&[
            ("email", server.bootstrap.console_email.as_str()),
            ("password", server.bootstrap.console_password.as_str()),
        ])
        .send()
        .await
        .unwrap();
    let cookies = set_cookies(&response);
    (
        cookies
            .get("engram_console")
            .cloned()
            .expect("access cookie"),
        cookies
            .get("engram_console_refresh")
            .cloned()
            .expect("refresh cookie"),
    )
}

/// The memories page with these cookies: 200, or where it redirects.
async fn visit(
    server: &TestServer,
    cookie: &str,
) -> (u16, Option<String>, HashMap<String, String>) {
    let response = client()
        .get(format!("{}/console/memories", server.base_url))
        .header("Cookie", cookie)
        .send()
        .await
        .unwrap();
    let location = response
        .headers()
        .get("location")
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    let cookies = set_cookies(&response);
    (response.status().as_u16(), location, cookies)
}

fn refused(visit: &(u16, Option<String>, HashMap<String, String>)) -> bool {
    visit.0 == 303 && visit.1.as_deref() == Some("/console/login")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_tokens_rotate_and_a_replay_ends_the_session() {
    let server = TestServer::spawn().await.unwrap();
    let (access, refresh) = login(&server).await;
    assert_eq!(access.split('.').count(), 3, "the access token is a JWT");
    assert_eq!(refresh.len(), 64);
    let both = format!("engram_console={access}; engram_console_refresh={refresh}");
    assert_eq!(visit(&server, &both).await.0, 200);

    // Without an access token, the refresh token renews the session (and is rotated).
    let renewed = visit(&server, &format!("engram_console_refresh={refresh}")).await;
    assert_eq!(renewed.0, 200, "{renewed:?}");
    let new_access = renewed
        .2
        .get("engram_console")
        .cloned()
        .expect("new access cookie");
    let new_refresh = renewed
        .2
        .get("engram_console_refresh")
        .cloned()
        .expect("new refresh cookie");
    assert_ne!(new_refresh, refresh);
    assert_eq!(
        visit(&server, &format!("engram_console={new_access}"))
            .await
            .0,
        200
    );

    // The old refresh token comes back: someone copied it. The whole session ends.
    assert!(refused(
        &visit(&server, &format!("engram_console_refresh={refresh}")).await
    ));
    assert!(refused(
        &visit(&server, &format!("engram_console={new_access}")).await
    ));
    assert!(refused(
        &visit(&server, &format!("engram_console_refresh={new_refresh}")).await
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_ends_the_session_and_cross_origin_posts_are_refused() {
    let server = TestServer::spawn().await.unwrap();
    let (access, refresh) = login(&server).await;
    let both = format!("engram_console={access}; engram_console_refresh={refresh}");
    let host = server.base_url.trim_start_matches("http://").to_string();

    // A forged cross-site logout (or any post) is refused, and the session survives it.
    let forged = client()
        .post(format!("{}/console/api/logout", server.base_url))
        .header("Cookie", &both)
        .header("Origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status().as_u16(), 403);
    assert_eq!(visit(&server, &both).await.0, 200);

    let logout = client()
        .post(format!("{}/console/api/logout", server.base_url))
        .header("Cookie", &both)
        .header("Origin", format!("http://{host}"))
        .send()
        .await
        .unwrap();
    assert!(
        logout.status().is_redirection() || logout.status().is_success(),
        "{}",
        logout.status()
    );
    let cleared = set_cookies(&logout);
    assert_eq!(cleared.get("engram_console").map(String::as_str), Some(""));
    assert_eq!(
        cleared.get("engram_console_refresh").map(String::as_str),
        Some("")
    );
    // A copy of the cookies taken before the logout is worthless now.
    assert!(refused(
        &visit(&server, &format!("engram_console={access}")).await
    ));
    assert!(refused(
        &visit(&server, &format!("engram_console_refresh={refresh}")).await
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_access_token_with_an_unknown_key_id_is_refused() {
    let server = TestServer::spawn().await.unwrap();
    let (access, _) = login(&server).await;
    let parts: Vec<&str> = access.split('.').collect();
    let header: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
    assert_eq!(header["kid"], "console-v1");
    assert_eq!(header["alg"], "HS256");
    let claims: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    for claim in ["iss", "aud", "sub", "typ", "sid", "exp", "nbf"] {
        assert!(!claims[claim].is_null(), "claim {claim} missing: {claims}");
    }
    // Same key, same claims, another key id: refused.
    let secrets = engram_cli::bootstrap::load_or_create_server_secrets(&server.data_dir).unwrap();
    let mut other_kid = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    other_kid.kid = Some("console-v0".to_string());
    let forged = jsonwebtoken::encode(
        &other_kid,
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(&secrets.console_signing_secret),
    )
    .unwrap();
    assert!(refused(
        &visit(&server, &format!("engram_console={forged}")).await
    ));
    assert_eq!(
        visit(&server, &format!("engram_console={access}")).await.0,
        200
    );
}

fn key_id_of(access_token: &str) -> String {
    let header = access_token.split('.').next().unwrap();
    let header: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
    header["kid"].as_str().unwrap().to_string()
}

/// Raising ENGRAM_CONSOLE_SIGNING_KEY_VERSION rotates the console signing key: access tokens
/// of the previous key keep working for their few minutes, older ones are refused, and a
/// session carries on through its refresh token with a token of the new key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_the_console_signing_key_signs_nobody_out() {
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_in(directory.path()).await.unwrap();
    let (access_v1, refresh) = login(&server).await;
    assert_eq!(key_id_of(&access_v1), "console-v1");
    let (stopped, data_dir, _) = server.stop();
    assert!(stopped);

    let server = TestServer::spawn_with(&data_dir, &[("ENGRAM_CONSOLE_SIGNING_KEY_VERSION", "2")])
        .await
        .unwrap();
    let visit_v1 = visit(&server, &format!("engram_console={access_v1}")).await;
    assert_eq!(visit_v1.0, 200, "the previous key still verifies");
    let (access_v2, _) = login(&server).await;
    assert_eq!(key_id_of(&access_v2), "console-v2");
    let (stopped, data_dir, _) = server.stop();
    assert!(stopped);

    let server = TestServer::spawn_with(&data_dir, &[("ENGRAM_CONSOLE_SIGNING_KEY_VERSION", "3")])
        .await
        .unwrap();
    assert!(
        refused(&visit(&server, &format!("engram_console={access_v1}")).await),
        "two versions back is refused"
    );
    assert_eq!(
        visit(&server, &format!("engram_console={access_v2}"))
            .await
            .0,
        200
    );
    // With its refresh token, the first session continues under the new key.
    let renewed = visit(
        &server,
        &format!("engram_console={access_v1}; engram_console_refresh={refresh}"),
    )
    .await;
    assert_eq!(renewed.0, 200);
    assert_eq!(key_id_of(&renewed.2["engram_console"]), "console-v3");
}
