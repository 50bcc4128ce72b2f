//! Which `Host` names the broker answers browsers under: DNS-rebinding protection shared by MCP (every request)
//! and the REST API's same-origin check (browser requests that change state). A page of another site whose
//! name was re-pointed at the broker's address sends its own name as `Host`; it is not on the list.

/// Whether `host` (`name` or `name:port`, as in a `Host` header or an origin's authority) is on `allowed`
/// (names with or without a port; `*` allows any).
pub fn host_allowed(allowed: &[String], host: &str) -> bool {
    let name = host.rsplit_once(':').filter(|(_, port)| port.parse::<u16>().is_ok()).map_or(host, |(name, _)| name);
    allowed.iter().any(|entry| entry == "*" || entry.eq_ignore_ascii_case(host) || entry.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::host_allowed;

    #[test]
    fn names_match_with_or_without_their_port() {
        let allowed: Vec<String> = ["localhost", "127.0.0.1", "[::1]", "ark.example:8443"].map(String::from).into();
        for host in ["localhost", "localhost:8080", "127.0.0.1:1", "[::1]:8081", "LOCALHOST", "ark.example:8443"] {
            assert!(host_allowed(&allowed, host), "{host}");
        }
        for host in ["evil.example", "evil.example:8080", "ark.example", "ark.example:1", "localhost.evil", ""] {
            assert!(!host_allowed(&allowed, host), "{host}");
        }
        assert!(host_allowed(&["*".to_owned()], "anything:1"));
    }
}
