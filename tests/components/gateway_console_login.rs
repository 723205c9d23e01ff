//! Console sign-in throttling against a real SQLite database and real argon2 hashes: five
//! wrong passwords lock the e-mail, the right password is then refused too, other accounts'
//! e-mails are unaffected, and a successful sign-in clears the count.

use engram_console::{ConsoleBackend, ConsoleError};
use engram_engine::ConsoleAccess;
use engram_engine::console_credentials::{ConsoleSessionKeys, hash_password};
use engram_engine::login_throttle::MAX_FAILURES;
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

#[tokio::test]
async fn repeated_wrong_passwords_lock_the_email_until_the_lockout_ends() {
    let (backend, _directory) = backend().await;
    // A success resets the count: four failures, a success, four more failures: no lock.
    for _ in 0..MAX_FAILURES - 1 {
        assert_eq!(
            backend
                .login(EMAIL.into(), "wrong".into(), &Default::default())
                .await,
            Err(ConsoleError::InvalidCredentials)
        );
    }
    assert!(
        backend
            .login(EMAIL.into(), PASSWORD.into(), &Default::default())
            .await
            .is_ok()
    );
    for _ in 0..MAX_FAILURES - 1 {
        assert_eq!(
            backend
                .login(EMAIL.into(), "wrong".into(), &Default::default())
                .await,
            Err(ConsoleError::InvalidCredentials)
        );
    }
    assert!(
        backend
            .login(EMAIL.into(), PASSWORD.into(), &Default::default())
            .await
            .is_ok()
    );

    for _ in 0..MAX_FAILURES {
        assert_eq!(
            backend
                .login(EMAIL.into(), "wrong".into(), &Default::default())
                .await,
            Err(ConsoleError::InvalidCredentials)
        );
    }
    // Locked: even the right password (in another casing of the e-mail) is refused.
    match backend
        .login(
            " Owner@Example.com ".into(),
            PASSWORD.into(),
            &Default::default(),
        )
        .await
    {
        Err(ConsoleError::TooManyAttempts {
            retry_after_seconds,
        }) => {
            assert!(retry_after_seconds > 0 && retry_after_seconds <= 15 * 60)
        }
        other => panic!("expected a lockout, got {other:?}"),
    }
    // Another e-mail is not locked by this one's failures.
    assert_eq!(
        backend
            .login(
                "someone@example.com".into(),
                "wrong".into(),
                &Default::default()
            )
            .await,
        Err(ConsoleError::InvalidCredentials)
    );
}
