//! Proof that an inbound request comes from Slack or GitHub: Slack's v0 signature (HMAC-SHA256 of
//! `v0:{timestamp}:{raw body}`, within five minutes) and GitHub's `X-Hub-Signature-256` (HMAC-SHA256 of the
//! raw body). Both are compared in constant time (`Mac::verify_slice`).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// How far a Slack request's timestamp may be from now (Slack's recommendation), against replays.
const SLACK_WINDOW_SECONDS: i64 = 300;

/// Why a signature is refused (said in the 401; never the expected value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// A header is missing or malformed.
    #[error("the request is not signed")]
    Unsigned,
    /// The timestamp is more than five minutes from now.
    #[error("the request's timestamp is too old or too new")]
    Stale,
    /// The signature does not match.
    #[error("the signature does not match")]
    Mismatch,
}

/// Checks Slack's `X-Slack-Signature` (`v0=<hex>`) over `timestamp` (`X-Slack-Request-Timestamp`) and `body`,
/// at `now` (Unix seconds).
pub fn slack(secret: &str, timestamp: &str, body: &[u8], signature: &str, now: i64) -> Result<(), Refused> {
    let sent_at: i64 = timestamp.trim().parse().map_err(|_| Refused::Unsigned)?;
    if now.abs_diff(sent_at) > SLACK_WINDOW_SECONDS.unsigned_abs() {
        return Err(Refused::Stale);
    }
    let expected = signature.strip_prefix("v0=").and_then(|hex| hex::decode(hex).ok()).ok_or(Refused::Unsigned)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).map_err(|_| Refused::Mismatch)?;
    mac.update(format!("v0:{}:", timestamp.trim()).as_bytes());
    mac.update(body);
    mac.verify_slice(&expected).map_err(|_| Refused::Mismatch)
}

/// Checks GitHub's `X-Hub-Signature-256` (`sha256=<hex>`) over `body`.
pub fn github(secret: &str, body: &[u8], signature: &str) -> Result<(), Refused> {
    let expected = signature.strip_prefix("sha256=").and_then(|hex| hex::decode(hex).ok()).ok_or(Refused::Unsigned)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).map_err(|_| Refused::Mismatch)?;
    mac.update(body);
    mac.verify_slice(&expected).map_err(|_| Refused::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slack's documented example (api.slack.com/authentication/verifying-requests-from-slack).
    const SLACK_BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const SLACK_SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    #[test]
    fn slacks_documented_example_verifies_and_tampering_does_not() {
        let now = 1_531_420_618;
        assert_eq!(slack(SLACK_SECRET, "1531420618", SLACK_BODY.as_bytes(), SLACK_SIGNATURE, now), Ok(()));
        assert_eq!(slack(SLACK_SECRET, "1531420618", SLACK_BODY.as_bytes(), SLACK_SIGNATURE, now + 299), Ok(()));
        let stale = slack(SLACK_SECRET, "1531420618", SLACK_BODY.as_bytes(), SLACK_SIGNATURE, now + 301);
        assert_eq!(stale, Err(Refused::Stale));
        let tampered = format!("{SLACK_BODY}x");
        assert_eq!(
            slack(SLACK_SECRET, "1531420618", tampered.as_bytes(), SLACK_SIGNATURE, now),
            Err(Refused::Mismatch)
        );
        assert_eq!(slack("wrong", "1531420618", SLACK_BODY.as_bytes(), SLACK_SIGNATURE, now), Err(Refused::Mismatch));
        assert_eq!(slack(SLACK_SECRET, "x", SLACK_BODY.as_bytes(), SLACK_SIGNATURE, now), Err(Refused::Unsigned));
        assert_eq!(slack(SLACK_SECRET, "1531420618", b"", "a2114d", now), Err(Refused::Unsigned));
    }

    #[test]
    fn githubs_documented_example_verifies_and_tampering_does_not() {
        // docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries
        let secret = "It's a Secret to Everybody";
        let signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(github(secret, b"Hello, World!", signature), Ok(()));
        assert_eq!(github(secret, b"Hello, World?", signature), Err(Refused::Mismatch));
        assert_eq!(github("another secret", b"Hello, World!", signature), Err(Refused::Mismatch));
        assert_eq!(github(secret, b"Hello, World!", "sha1=757107"), Err(Refused::Unsigned));
    }
}
