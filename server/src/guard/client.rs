//! Where a request comes from, and which site it was meant for, behind a reverse proxy.
//!
//! The client's address is the connection's peer, unless that peer is a proxy the operator
//! trusts (`--trusted-proxy`): then it is the right-most address in `X-Forwarded-For` that is
//! not itself a trusted proxy (entries further left could be forged by the client). The site's
//! own origin is `--public-url` when given (a proxy may rewrite `Host`), else the `Host` header.

use axum::http::HeaderMap;
use ipnet::IpNet;
use std::net::IpAddr;

#[derive(Debug, Clone, Default)]
pub struct ProxySettings {
    pub trusted: Vec<IpNet>,
    /// `host[:port]` of `--public-url`.
    pub public_authority: Option<String>,
}

impl ProxySettings {
    /// From `--trusted-proxy` entries (addresses or CIDR ranges) and `--public-url`.
    pub fn parse(trusted: &[String], public_url: Option<&str>) -> Result<ProxySettings, String> {
        let trusted = trusted
            .iter()
            .map(|entry| {
                let entry = entry.trim();
                entry
                    .parse::<IpNet>()
                    .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        format!("--trusted-proxy takes addresses or CIDR ranges, not \"{entry}\"")
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let public_authority = public_url
            .map(|url| {
                let rest = url
                    .trim()
                    .strip_prefix("https://")
                    .or_else(|| url.trim().strip_prefix("http://"))
                    .ok_or_else(|| {
                        format!("--public-url must start with https:// or http://, not \"{url}\"")
                    })?;
                let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
                if authority.is_empty() {
                    return Err(format!("--public-url names no host: \"{url}\""));
                }
                Ok(authority.to_ascii_lowercase())
            })
            .transpose()?;
        Ok(ProxySettings {
            trusted,
            public_authority,
        })
    }

    fn trusts(&self, address: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&address))
    }

    /// The client's address for a request from `peer` with these headers.
    pub fn client(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> Option<IpAddr> {
        let peer = peer?;
        if !self.trusts(peer) {
            return Some(peer);
        }
        let forwarded: Vec<IpAddr> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|a| a.trim().parse().ok())
            .collect();
        Some(
            forwarded
                .iter()
                .rev()
                .copied()
                .find(|a| !self.trusts(*a))
                .unwrap_or(peer),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn forwarded(value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", HeaderValue::from_static(value));
        h
    }

    #[test]
    fn a_trusted_proxy_names_the_client_and_anyone_else_is_the_client() {
        let proxies =
            ProxySettings::parse(&["10.0.0.0/8".into(), "192.168.1.5".into()], None).unwrap();
        let via_proxy = Some("10.1.2.3".parse().unwrap());
        assert_eq!(
            proxies.client(via_proxy, &forwarded("198.51.100.7, 203.0.113.5")),
            Some("203.0.113.5".parse().unwrap()),
            "the right-most untrusted entry; the left ones could be forged"
        );
        assert_eq!(
            proxies.client(via_proxy, &forwarded("203.0.113.5, 10.9.9.9")),
            Some("203.0.113.5".parse().unwrap()),
            "chained trusted proxies are skipped"
        );
        let direct = Some("203.0.113.77".parse().unwrap());
        assert_eq!(
            proxies.client(direct, &forwarded("1.2.3.4")),
            direct,
            "an untrusted peer cannot claim another address"
        );
        assert_eq!(proxies.client(via_proxy, &HeaderMap::new()), via_proxy);
    }

    #[test]
    fn bad_settings_are_refused_with_the_flag_named() {
        assert!(ProxySettings::parse(&["proxy.lab".into()], None)
            .unwrap_err()
            .contains("--trusted-proxy"));
        assert!(ProxySettings::parse(&[], Some("gpu.lab"))
            .unwrap_err()
            .contains("--public-url"));
        assert_eq!(
            ProxySettings::parse(&[], Some("https://GPU.lab/hourglass"))
                .unwrap()
                .public_authority
                .as_deref(),
            Some("gpu.lab")
        );
    }
}
