//! Test support: a brand-new PostgreSQL database per test on the local server (or the one
//! `ENGRAM_TEST_POSTGRES_URL` names), so runs never see each other's rows.

use sqlx::Connection;

/// The maintenance database of the local server, reachable with trust auth.
pub const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A database created for one test.
#[derive(Clone, Debug)]
pub struct TestDatabase {
    pub name: String,
    pub url: String,
}

pub fn admin_url() -> String {
    std::env::var("ENGRAM_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_ADMIN_URL.to_string())
}

/// Runs `sql` on the maintenance database; panics, naming the statement, if it fails.
pub async fn execute_as_admin(sql: &str) {
    let admin_url = admin_url();
    let mut admin = sqlx::PgConnection::connect(&admin_url)
        .await
        .unwrap_or_else(|error| {
            panic!("PostgreSQL at {admin_url} is required for these tests (make test starts it): {error}")
        });
    sqlx::query(sql)
        .execute(&mut admin)
        .await
        .unwrap_or_else(|error| panic!("{sql} failed: {error}"));
}

/// Creates an empty database with a unique `engram_test_…` name (`make test` drops old ones).
pub async fn create_database() -> TestDatabase {
    let name = format!("engram_test_{}", uuid::Uuid::now_v7().simple());
    execute_as_admin(&format!("CREATE DATABASE {name}")).await;
    let admin_url = admin_url();
    let (base, _) = admin_url
        .rsplit_once('/')
        .expect("ENGRAM_TEST_POSTGRES_URL ends in /database");
    TestDatabase {
        url: format!("{base}/{name}"),
        name,
    }
}

/// The URL of a fresh, empty database.
pub async fn fresh_database_url() -> String {
    create_database().await.url
}

/// Runs `sql` on the database at `database_url` (a test database); panics if it fails.
pub async fn execute_on(database_url: &str, sql: &str) {
    let mut connection = sqlx::PgConnection::connect(database_url)
        .await
        .unwrap_or_else(|error| panic!("cannot connect to {database_url}: {error}"));
    sqlx::query(sql)
        .execute(&mut connection)
        .await
        .unwrap_or_else(|error| panic!("{sql} failed: {error}"));
}
