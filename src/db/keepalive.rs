//! How a PostgreSQL connection that the network silently lost is noticed: TCP keepalive and
//! `TCP_USER_TIMEOUT` on both ends of every connection, so a partition (packets dropped, no reset) ends the
//! connection within the network timeout instead of the kernel's defaults (hours idle, ~15 minutes with data
//! in flight).
//!
//! The server's end is set with PostgreSQL's own settings, per session ([`server_settings`]). The broker's end
//! has no setting in sqlx 0.9 (launchbadge/sqlx#3540; PR #4355 adds one): [`guard_sockets_to`] finds the
//! process's TCP sockets to PostgreSQL's port and sets the options on them. It runs after each new
//! connection, so it costs one scan of the process's descriptors per connection made, not per query.

use crate::telemetry::chain;
use std::{os::fd::BorrowedFd, time::Duration};

use socket2::{SockRef, TcpKeepalive};

/// Probes a silent connection gets before it counts as lost; the first goes out after a quarter of the
/// timeout without traffic, the rest a quarter apart.
const PROBES: u32 = 3;

/// The session settings that make PostgreSQL notice a broker connection the network lost: the server ends
/// that session (and releases its locks, among them a replica's liveness lock) within `timeout`.
pub fn server_settings(timeout: Duration) -> [(&'static str, String); 4] {
    let quarter = quarter_seconds(timeout);
    [
        ("tcp_keepalives_idle", quarter.to_string()),
        ("tcp_keepalives_interval", quarter.to_string()),
        ("tcp_keepalives_count", PROBES.to_string()),
        ("tcp_user_timeout", format!("{}", timeout.as_millis())),
    ]
}

/// Keepalive counts in whole seconds, at least one.
fn quarter_seconds(timeout: Duration) -> u64 {
    (timeout.as_secs() / 4).max(1)
}

/// Sets keepalive and `TCP_USER_TIMEOUT` (`timeout`) on every TCP socket of this process whose peer's port
/// is `port`. A socket already set is set again, which changes nothing. Returns how many sockets were set.
pub fn guard_sockets_to(port: u16, timeout: Duration) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    let quarter = Duration::from_secs(quarter_seconds(timeout));
    let keepalive = TcpKeepalive::new().with_time(quarter).with_interval(quarter).with_retries(PROBES);
    let mut guarded = 0;
    for fd in entries.flatten().filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok()) {
        // SAFETY: `fd` was open when listed. Should it be closed meanwhile (or reused), the calls below fail
        // (EBADF, ENOTSOCK) or reach another socket, which the peer check filters; none touches memory.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let socket = SockRef::from(&fd);
        let is_peer = socket
            .peer_addr()
            .ok()
            .and_then(|address| address.as_socket())
            .is_some_and(|address| address.port() == port);
        if !is_peer || socket.r#type().ok() != Some(socket2::Type::STREAM) {
            continue;
        }
        let set = socket.set_tcp_keepalive(&keepalive).and_then(|()| socket.set_tcp_user_timeout(Some(timeout)));
        match set {
            Ok(()) => guarded += 1,
            Err(error) => tracing::debug!(error = %chain(&error), "cannot set keepalive on a PostgreSQL socket"),
        }
    }
    guarded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_settings_end_a_silent_session_within_the_timeout() {
        let settings = server_settings(Duration::from_secs(4));
        assert_eq!(settings[0], ("tcp_keepalives_idle", "1".to_owned()));
        assert_eq!(settings[2], ("tcp_keepalives_count", "3".to_owned()));
        assert_eq!(settings[3], ("tcp_user_timeout", "4000".to_owned()));
        // A timeout under four seconds still probes every second.
        assert_eq!(server_settings(Duration::from_millis(1500))[1], ("tcp_keepalives_interval", "1".to_owned()));
    }

    #[test]
    fn only_sockets_to_the_port_are_guarded() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert_eq!(guard_sockets_to(port, Duration::from_secs(8)), 1, "the client's socket, not the accepted one");
        let client = SockRef::from(&client);
        assert!(client.keepalive().unwrap());
        assert_eq!(client.tcp_user_timeout().unwrap(), Some(Duration::from_secs(8)));
        assert_eq!(client.tcp_keepalive_time().unwrap(), Duration::from_secs(2));
        assert!(!SockRef::from(&accepted).keepalive().unwrap());
    }
}
