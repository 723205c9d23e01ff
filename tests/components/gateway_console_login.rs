//! Console sign-in throttling against a real SQLite database and real argon2 hashes: a
//! stranger's wrong passwords slow the stranger's own address, never the owner's known
//! browser nor the owner at another address; other accounts' e-mails are unaffected.

use engram_console::ConsoleRequestOrigin;
use engram_console::{ConsoleBackend, ConsoleError};
use engram_engine::ConsoleAccess;
use engram_engine::console_credentials::{ConsoleSessionKeys, hash_password};
use engram_engine::login_throttle::FREE_FAILURES;
use engram_gateway::console::GatewayConsoleBackend;
use engram_storage::{ApiKeyPepper, Storage};
use std::time::Duration;

const EMAIL: &str = "owner@example.com";
const PASSWORD: &str = "correct horse battery staple";

async fn backend() -> (GatewayConsoleBackend, tempfile::TempDir) {
    let directory = tempfile::tempdir().unwrap();
    let storage = Storage::connect(&format!(
        "sqlite://{}?mode=rwc",
        directory.path().join("console.db").display()
    ))
    .await
    .unwrap();
    storage
        .bootstrap_organization(
            "org",
            "project",
            EMAIL,
            &hash_password(PASSWORD).unwrap(),
            &ApiKeyPepper::new(b"pepper".to_vec()),
        )
        .await
        .unwrap();
    let sessions = ConsoleSessionKeys::new(b"console signing secret", Duration::from_secs(600));
    (
        GatewayConsoleBackend::new(ConsoleAccess::new(storage, sessions)),
        directory,
    )
}

fn from(address: &str) -> ConsoleRequestOrigin {
    ConsoleRequestOrigin {
        ip: Some(address.to_string()),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_strangers_wrong_passwords_never_lock_the_owner_out() {
    let (backend, _directory) = backend().await;
    let (owners_office, strangers_cafe) = (from("192.0.2.10"), from("198.51.100.7"));
    // The owner's browser signed in before: it holds a device token.
    let signed_in = backend
        .login(EMAIL.into(), PASSWORD.into(), None, &owners_office)
        .await
        .unwrap();
    let device = signed_in
        .device
        .clone()
        .expect("a sign-in hands out a device token");

    // A stranger guesses: the free failures, one more, then the stranger waits, even with
    // the right password (and another casing of the e-mail).
    for _ in 0..=FREE_FAILURES {
        assert_eq!(
            backend
                .login(EMAIL.into(), "wrong".into(), None, &strangers_cafe)
                .await,
            Err(ConsoleError::InvalidCredentials)
        );
    }
    match backend
        .login(
            " Owner@Example.com ".into(),
            PASSWORD.into(),
            None,
            &strangers_cafe,
        )
        .await
    {
        Err(ConsoleError::TooManyAttempts {
            retry_after_seconds,
        }) => assert!((1..=15 * 60).contains(&retry_after_seconds)),
        other => panic!("expected the stranger to wait, got {other:?}"),
    }

    // The owner's known browser signs in even from the stranger's café, and the owner
    // signs in from the office without it.
    assert!(
        backend
            .login(
                EMAIL.into(),
                PASSWORD.into(),
                Some(device.clone()),
                &strangers_cafe
            )
            .await
            .is_ok(),
        "a known device is slowed only by its own failures"
    );
    assert!(
        backend
            .login(EMAIL.into(), PASSWORD.into(), None, &owners_office)
            .await
            .is_ok(),
        "another address is not slowed by the stranger's failures"
    );
    // A device token of another account, or a forged one, makes no browser known.
    assert!(matches!(
        backend
            .login(
                EMAIL.into(),
                PASSWORD.into(),
                Some("forged".into()),
                &strangers_cafe
            )
            .await,
        Err(ConsoleError::TooManyAttempts { .. })
    ));
    // Another account's e-mail is not slowed by this one's failures.
    assert_eq!(
        backend
            .login(
                "someone@example.com".into(),
                "wrong".into(),
                None,
                &strangers_cafe
            )
            .await,
        Err(ConsoleError::InvalidCredentials)
    );
}

/// Behind an ingress every browser arrives from the proxy's address: a stranger who spent
/// that address's budget for the unauthenticated routes locked every member out, because the
/// budget was checked before the known-device path. A browser with a valid device token of
/// the account now signs in whatever the address's budget says.
#[tokio::test]
async fn behind_one_proxy_address_a_known_device_signs_in_after_a_stranger_spent_its_budget() {
    use engram_engine::login_throttle::ADDRESS_BURST;
    let (backend, _directory) = backend().await;
    let ingress = from("10.0.0.1");
    let signed_in = backend
        .login(EMAIL.into(), PASSWORD.into(), None, &ingress)
        .await
        .unwrap();
    let device = signed_in.device.expect("a device token");
    let mut refused = false;
    for attempt in 0..=ADDRESS_BURST + 5 {
        match backend
            .login(
                format!("stranger-{attempt}@example.com"),
                "guess".into(),
                None,
                &ingress,
            )
            .await
        {
            Err(ConsoleError::TooManyAttempts { .. }) => {
                refused = true;
                break;
            }
            Err(ConsoleError::InvalidCredentials) => {}
            other => panic!("unexpected answer to a stranger: {other:?}"),
        }
    }
    assert!(refused, "the address's budget ran out");
    assert!(
        backend
            .login(EMAIL.into(), PASSWORD.into(), Some(device), &ingress)
            .await
            .is_ok(),
        "the owner's known browser signs in through the same ingress"
    );
}
