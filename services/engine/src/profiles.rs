//! Retrieval profiles: named search tunings (retrieval mode, fusion, weights, diversity,
//! minimum score) a project compares, sends a share of its traffic to, or evaluates.

pub use engram_core::search::SearchTuning;

/// The profile name of a search that used no profile.
pub const DEFAULT_PROFILE: &str = "default";

/// Which profile serves a search that named none: the first whose cumulative traffic share
/// exceeds `draw` (uniform in [0, 1)), else none (the default).
pub fn profile_for_draw(profiles: &[(String, f64)], draw: f64) -> Option<&str> {
    let mut cumulative = 0.0;
    for (name, share) in profiles {
        cumulative += share;
        if draw < cumulative {
            return Some(name);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traffic_is_split_by_cumulative_share() {
        let profiles = vec![("a".to_string(), 0.2), ("b".to_string(), 0.3)];
        assert_eq!(profile_for_draw(&profiles, 0.1), Some("a"));
        assert_eq!(profile_for_draw(&profiles, 0.2), Some("b"));
        assert_eq!(profile_for_draw(&profiles, 0.49), Some("b"));
        assert_eq!(profile_for_draw(&profiles, 0.5), None);
    }
}
