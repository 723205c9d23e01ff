//! The client address of a request: the TCP peer, unless the peer is one of the configured
//! trusted proxies, whose `X-Forwarded-For` then names the client. Everything downstream
//! (audit `ip`, rate limits, console sign-in throttling) reads the one address set here.

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};

/// The proxies in front of Engram, as addresses or networks.
#[derive(Clone, Debug, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// `10.0.0.0/8`, `192.0.2.7` or `2001:db8::/32` each; a bad entry is named.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let mut networks = Vec::with_capacity(entries.len());
        for entry in entries {
            let entry = entry.trim();
            let network = entry
                .parse::<IpNet>()
                .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    format!("{entry:?} is not an address or network such as 10.0.0.0/8")
                })?;
            networks.push(network);
        }
        Ok(Self(networks))
    }

    fn trusts(&self, address: IpAddr) -> bool {
        self.0.iter().any(|network| network.contains(&address))
    }

    /// The client of a request that came from `peer` with these `X-Forwarded-For` values:
    /// from a trusted proxy, the right-most listed address that is not itself a trusted
    /// proxy (each proxy appends the address it saw, so entries to its left are whatever the
    /// client claimed and are never believed); an entry that is not an address ends the walk
    /// at the nearest trusted hop. From anyone else, the peer.
    pub fn client_of<'a>(
        &self,
        peer: IpAddr,
        forwarded_for: impl Iterator<Item = &'a str>,
    ) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let entries: Vec<&str> = forwarded_for
            .flat_map(|value| value.split(','))
            .map(str::trim)
            .collect();
        let mut nearest_trusted = peer;
        for entry in entries.iter().rev() {
            let Ok(address) = entry.parse::<IpAddr>() else {
                return nearest_trusted;
            };
            if !self.trusts(address) {
                return address;
            }
            nearest_trusted = address;
        }
        nearest_trusted
    }
}

/// Replaces the request's `ConnectInfo` with its client's address when it came through a
/// trusted proxy, so every reader of the peer address sees the client.
pub async fn resolve_client_address(
    State(trusted): State<TrustedProxies>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(ConnectInfo(peer)) = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .copied()
    {
        let forwarded_for = request
            .headers()
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok());
        let client = trusted.client_of(peer.ip(), forwarded_for);
        if client != peer.ip() {
            request
                .extensions_mut()
                .insert(ConnectInfo(SocketAddr::new(client, 0)));
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxies(entries: &[&str]) -> TrustedProxies {
        TrustedProxies::parse(
            &entries
                .iter()
                .map(|entry| entry.to_string())
                .collect::<Vec<_>>(),
        )
        .unwrap()
    }

    fn address(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn only_a_trusted_proxy_names_the_client() {
        let trusted = proxies(&["10.0.0.0/8", "192.0.2.7"]);
        // Through the ingress: the client the ingress saw, not what the client claimed.
        assert_eq!(
            trusted.client_of(address("10.1.2.3"), ["6.6.6.6, 203.0.113.5"].into_iter()),
            address("203.0.113.5")
        );
        // Two proxies in a row: both skipped.
        assert_eq!(
            trusted.client_of(
                address("10.1.2.3"),
                ["203.0.113.5", "192.0.2.7"].into_iter()
            ),
            address("203.0.113.5")
        );
        // From anyone else the header is ignored.
        assert_eq!(
            trusted.client_of(address("198.51.100.1"), ["203.0.113.5"].into_iter()),
            address("198.51.100.1")
        );
        // A client cannot choose its address by writing to the left of, or garbage into,
        // the header: the proxy appends what it saw, and that is what counts.
        assert_eq!(
            trusted.client_of(address("10.1.2.3"), ["1.2.3.4, x, 203.0.113.5"].into_iter()),
            address("203.0.113.5")
        );
        assert_eq!(
            trusted.client_of(address("10.1.2.3"), ["1.2.3.4, x"].into_iter()),
            address("10.1.2.3")
        );
        assert_eq!(
            trusted.client_of(address("10.1.2.3"), ["1.2.3.4, 192.0.2.7"].into_iter()),
            address("1.2.3.4"),
            "behind two trusted hops the client is the one the outer proxy saw"
        );
        // No header, or garbage: the proxy itself.
        assert_eq!(
            trusted.client_of(address("10.1.2.3"), std::iter::empty()),
            address("10.1.2.3")
        );
        assert_eq!(
            trusted.client_of(address("10.1.2.3"), ["not an address"].into_iter()),
            address("10.1.2.3")
        );
        assert!(TrustedProxies::parse(&["10.0.0.0/33".to_string()]).is_err());
        // Nothing trusted by default.
        assert_eq!(
            TrustedProxies::default().client_of(address("10.1.2.3"), ["203.0.113.5"].into_iter()),
            address("10.1.2.3")
        );
    }
}
