//! What a credential may do (API scopes) and the API key format: `egk_<live|test>_<public
//! id>_<secret><checksum>`, whose CRC-32 checksum lets secret scanners recognise a leaked key
//! without asking the server.

use std::collections::BTreeSet;
use std::fmt;

pub const API_KEY_PREFIX: &str = "egk_";
pub const API_KEY_PUBLIC_ID_LENGTH: usize = 16;
pub const API_KEY_SECRET_LENGTH: usize = 40;
pub const API_KEY_CHECKSUM_LENGTH: usize = 6;

/// One permission of a project credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ApiScope {
    MemoriesRead,
    MemoriesWrite,
    MemoriesDelete,
    /// Mark memories verified (or withdraw it): a supervisor's or a reviewer's word that an
    /// agent's conclusion holds.
    MemoriesVerify,
    /// Manage the project's API keys (and, later, its settings).
    Admin,
}

impl ApiScope {
    pub const ALL: [ApiScope; 5] = [
        ApiScope::MemoriesRead,
        ApiScope::MemoriesWrite,
        ApiScope::MemoriesDelete,
        ApiScope::MemoriesVerify,
        ApiScope::Admin,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ApiScope::MemoriesRead => "memories:read",
            ApiScope::MemoriesWrite => "memories:write",
            ApiScope::MemoriesDelete => "memories:delete",
            ApiScope::MemoriesVerify => "memories:verify",
            ApiScope::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|scope| scope.as_str() == text)
    }
}

impl fmt::Display for ApiScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The scopes a key holds. Stored as space-separated names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiScopes(BTreeSet<ApiScope>);

impl ApiScopes {
    pub fn all() -> Self {
        Self(ApiScope::ALL.into_iter().collect())
    }

    pub fn from_scopes(scopes: impl IntoIterator<Item = ApiScope>) -> Self {
        Self(scopes.into_iter().collect())
    }

    pub fn contains(&self, scope: ApiScope) -> bool {
        self.0.contains(&scope)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = ApiScope> + '_ {
        self.0.iter().copied()
    }

    /// Whether every scope of `other` is also held here (a derived credential never exceeds
    /// its parent).
    pub fn covers(&self, other: &ApiScopes) -> bool {
        other.0.is_subset(&self.0)
    }

    pub fn to_stored_text(&self) -> String {
        self.iter()
            .map(ApiScope::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Names that are not scopes are dropped (a stored value is trusted; request input is
    /// validated before it gets here).
    pub fn from_stored_text(text: &str) -> Self {
        Self(
            text.split_whitespace()
                .filter_map(ApiScope::parse)
                .collect(),
        )
    }

    pub fn names(&self) -> Vec<String> {
        self.iter()
            .map(|scope| scope.as_str().to_string())
            .collect()
    }

    /// The scopes of `wanted` not held here, in order: what a credential lacks to hand
    /// `wanted` on (a key, or a token it mints, never exceeds its maker).
    pub fn missing_from(&self, wanted: &ApiScopes) -> Vec<ApiScope> {
        wanted.0.difference(&self.0).copied().collect()
    }
}

/// What a console member may do in their organization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsoleRole {
    /// Everything, including the organization itself.
    Owner,
    /// Everything but the organization itself.
    Admin,
    /// Read, correct, delete and erase memories; read the audit log.
    Compliance,
    /// Dashboards and usage; never memory content.
    Analyst,
    /// API keys and settings; never memory content.
    Developer,
}

impl ConsoleRole {
    pub const ALL: [ConsoleRole; 5] = [
        ConsoleRole::Owner,
        ConsoleRole::Admin,
        ConsoleRole::Compliance,
        ConsoleRole::Analyst,
        ConsoleRole::Developer,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ConsoleRole::Owner => "owner",
            ConsoleRole::Admin => "admin",
            ConsoleRole::Compliance => "compliance",
            ConsoleRole::Analyst => "analyst",
            ConsoleRole::Developer => "developer",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|role| role.as_str() == text)
    }

    /// A stored role this version does not know gets the least privilege.
    pub fn from_stored(text: &str) -> Self {
        Self::parse(text).unwrap_or(ConsoleRole::Analyst)
    }

    /// The API scopes a key minted or rolled by this member may carry: only what the role
    /// can exercise itself. A developer never sees memory content, deletes memories or reads
    /// the audit log, so its keys write memories and nothing else.
    pub fn grantable_api_scopes(self) -> ApiScopes {
        match self {
            ConsoleRole::Owner | ConsoleRole::Admin => ApiScopes::all(),
            ConsoleRole::Developer => ApiScopes::from_scopes([ApiScope::MemoriesWrite]),
            ConsoleRole::Compliance | ConsoleRole::Analyst => ApiScopes::default(),
        }
    }

    /// Whether a member with this role may give `role` to someone, or change or remove a
    /// member who has it: admins manage everyone but owners.
    pub const fn can_assign(self, role: ConsoleRole) -> bool {
        match self {
            ConsoleRole::Owner => true,
            ConsoleRole::Admin => !matches!(role, ConsoleRole::Owner),
            _ => false,
        }
    }
}

/// The language the console speaks to a member who chose one (none chosen: the browser's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsoleLanguage {
    English,
    Chinese,
}

impl ConsoleLanguage {
    pub const ALL: [ConsoleLanguage; 2] = [ConsoleLanguage::English, ConsoleLanguage::Chinese];

    /// The stored and sent tag: `en`, `zh`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ConsoleLanguage::English => "en",
            ConsoleLanguage::Chinese => "zh",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|language| language.as_str() == text)
    }
}

/// Live keys serve production traffic; test keys are for development and CI. The prefix
/// shows which one a key is, so a test key pasted into production is noticed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyEnvironment {
    Live,
    Test,
}

impl KeyEnvironment {
    pub const fn as_str(self) -> &'static str {
        match self {
            KeyEnvironment::Live => "live",
            KeyEnvironment::Test => "test",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "live" => Some(KeyEnvironment::Live),
            "test" => Some(KeyEnvironment::Test),
            _ => None,
        }
    }
}

/// The parts of a presented API key.
#[derive(Debug, PartialEq, Eq)]
pub struct PresentedApiKey<'a> {
    pub environment: KeyEnvironment,
    pub public_id: &'a str,
    pub secret: &'a str,
}

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// CRC-32 of everything before the checksum, as 6 base-62 digits.
fn checksum_of(body: &str) -> String {
    let mut value = crc32fast::hash(body.as_bytes()) as u64;
    let mut digits = [b'0'; API_KEY_CHECKSUM_LENGTH];
    for digit in digits.iter_mut().rev() {
        *digit = BASE62[(value % 62) as usize];
        value /= 62;
    }
    String::from_utf8_lossy(&digits).to_string()
}

/// The text of a new key from its random parts.
pub fn format_api_key(environment: KeyEnvironment, public_id: &str, secret: &str) -> String {
    let body = format!(
        "{API_KEY_PREFIX}{}_{public_id}_{secret}",
        environment.as_str()
    );
    let checksum = checksum_of(&body);
    format!("{body}{checksum}")
}

/// Split a presented key; `None` for anything that is not a well-formed key with a correct
/// checksum. Keys minted before checksums existed (`egk_<public id>_<secret>`) are live keys.
pub fn parse_api_key(presented: &str) -> Option<PresentedApiKey<'_>> {
    let rest = presented.strip_prefix(API_KEY_PREFIX)?;
    let (environment, rest) = match rest.split_once('_') {
        Some((environment, rest)) if KeyEnvironment::parse(environment).is_some() => {
            (KeyEnvironment::parse(environment)?, rest)
        }
        _ => {
            let (public_id, secret) = rest.split_once('_')?;
            let well_formed = public_id.len() == API_KEY_PUBLIC_ID_LENGTH
                && secret.len() == API_KEY_SECRET_LENGTH
                && secret.bytes().all(|byte| byte.is_ascii_alphanumeric());
            return well_formed.then_some(PresentedApiKey {
                environment: KeyEnvironment::Live,
                public_id,
                secret,
            });
        }
    };
    let (public_id, secret_and_checksum) = rest.split_once('_')?;
    if public_id.len() != API_KEY_PUBLIC_ID_LENGTH
        || secret_and_checksum.len() != API_KEY_SECRET_LENGTH + API_KEY_CHECKSUM_LENGTH
        || !secret_and_checksum.is_ascii()
    {
        return None;
    }
    let (secret, checksum) = secret_and_checksum.split_at(API_KEY_SECRET_LENGTH);
    let body = &presented[..presented.len() - API_KEY_CHECKSUM_LENGTH];
    if checksum_of(body) != checksum {
        return None;
    }
    Some(PresentedApiKey {
        environment,
        public_id,
        secret,
    })
}

/// The public id of anything shaped like a key, checksum unchecked: what rate limits are
/// keyed by, so wrong secrets tried against one key id share that key's bucket.
pub fn api_key_public_id(presented: &str) -> Option<&str> {
    let rest = presented.strip_prefix(API_KEY_PREFIX)?;
    let rest = rest
        .strip_prefix("live_")
        .or_else(|| rest.strip_prefix("test_"))
        .unwrap_or(rest);
    let (public_id, _) = rest.split_once('_')?;
    (public_id.len() == API_KEY_PUBLIC_ID_LENGTH).then_some(public_id)
}

/// For secret scanners: whether `text` is an Engram API key with a valid checksum.
pub fn looks_like_valid_api_key(text: &str) -> bool {
    parse_api_key(text).is_some_and(|key| {
        // Legacy keys have no checksum to verify.
        text.len()
            == API_KEY_PREFIX.len()
                + key.environment.as_str().len()
                + 1
                + API_KEY_PUBLIC_ID_LENGTH
                + 1
                + API_KEY_SECRET_LENGTH
                + API_KEY_CHECKSUM_LENGTH
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PUBLIC_ID: &str = "abcdefgh12345678";
    const SECRET: &str = "0123456789abcdefghijABCDEFGHIJ0123456789";

    #[test]
    fn minted_keys_parse_back_and_show_their_environment() {
        let live = format_api_key(KeyEnvironment::Live, PUBLIC_ID, SECRET);
        assert!(live.starts_with("egk_live_abcdefgh12345678_"));
        let parsed = parse_api_key(&live).unwrap();
        assert_eq!(parsed.environment, KeyEnvironment::Live);
        assert_eq!((parsed.public_id, parsed.secret), (PUBLIC_ID, SECRET));
        let test = format_api_key(KeyEnvironment::Test, PUBLIC_ID, SECRET);
        assert!(test.starts_with("egk_test_"));
        assert_eq!(
            parse_api_key(&test).unwrap().environment,
            KeyEnvironment::Test
        );
        assert!(looks_like_valid_api_key(&live) && looks_like_valid_api_key(&test));
        assert_eq!(api_key_public_id(&live), Some(PUBLIC_ID));
        assert_eq!(
            api_key_public_id(&format!("egk_{PUBLIC_ID}_{SECRET}")),
            Some(PUBLIC_ID)
        );
    }

    #[test]
    fn any_single_character_change_breaks_the_checksum() {
        let key = format_api_key(KeyEnvironment::Live, PUBLIC_ID, SECRET);
        for position in "egk_live_".len()..key.len() {
            let mut bytes = key.clone().into_bytes();
            bytes[position] = if bytes[position] == b'x' { b'y' } else { b'x' };
            let changed = String::from_utf8(bytes).unwrap();
            assert!(
                parse_api_key(&changed).is_none(),
                "changed at {position}: {changed}"
            );
        }
    }

    #[test]
    fn legacy_keys_still_parse_as_live_keys_without_a_checksum() {
        let legacy = format!("egk_{PUBLIC_ID}_{SECRET}");
        let parsed = parse_api_key(&legacy).unwrap();
        assert_eq!(parsed.environment, KeyEnvironment::Live);
        assert!(!looks_like_valid_api_key(&legacy));
        assert!(parse_api_key("egk_short_secret").is_none());
        assert!(parse_api_key("Bearer something").is_none());
    }

    #[test]
    fn scopes_round_trip_and_cover_subsets() {
        let all = ApiScopes::all();
        assert_eq!(
            all.to_stored_text(),
            "memories:read memories:write memories:delete memories:verify admin"
        );
        assert_eq!(ApiScopes::from_stored_text(&all.to_stored_text()), all);
        let read_only = ApiScopes::from_scopes([ApiScope::MemoriesRead]);
        assert!(all.covers(&read_only));
        assert!(!read_only.covers(&all));
    }
}
