//! The subscription APIs' keys (no I/O): the Ed25519 key pair webhooks are signed with and its JWKS entry,
//! and the HMAC-signed tokens callbacks and claims carry. Every replica loads the same key material from
//! PostgreSQL ([`super::store`]), so a webhook signed on one verifies against the JWKS of any, and a token
//! made on one is taken by all.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, KeyInit, Mac};
use ring::signature::{Ed25519KeyPair, KeyPair};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How long a callback or claim token is good for.
const TOKEN_SECONDS: i64 = 3600;

/// The keys, ready to sign.
pub struct Keys {
    pair: Ed25519KeyPair,
    hmac_key: Vec<u8>,
    x: String,
    kid: String,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys").field("kid", &self.kid).finish_non_exhaustive()
    }
}

/// What a token says, once its signature is checked.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Claims {
    /// `subscription:{id}`.
    pub sub: String,
    /// The wake generation it was made for.
    pub epoch: i64,
    /// When it expires (Unix seconds).
    pub exp: i64,
    /// Its own id.
    pub jti: String,
}

/// Why a token was not taken (401).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenRefusal {
    /// Not one of ours, or not for this subscription.
    Invalid,
    /// Ours, and too old.
    Expired,
}

impl Keys {
    /// The keys of a 32-byte Ed25519 seed and an HMAC key; `None` for a seed of another length.
    pub fn new(seed: &[u8], hmac_key: Vec<u8>) -> Option<Self> {
        let pair = Ed25519KeyPair::from_seed_unchecked(seed).ok()?;
        let x = URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
        // The key's RFC 7638 thumbprint, as the reference server names its keys.
        let thumbprint = Sha256::digest(format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{x}"}}"#).as_bytes());
        let kid = format!("ds_{}", URL_SAFE_NO_PAD.encode(thumbprint));
        Some(Keys { pair, hmac_key, x, kid })
    }

    /// The signing key's id.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// `GET __ds/jwks.json`'s body.
    pub fn jwks(&self) -> serde_json::Value {
        serde_json::json!({"keys": [{
            "kty": "OKP", "crv": "Ed25519", "x": self.x, "kid": self.kid, "use": "sig", "alg": "EdDSA",
        }]})
    }

    /// The `webhook-signature` header of `body` sent at `unix_seconds`: Ed25519 over `"{t}.{body}"`.
    pub fn webhook_signature(&self, unix_seconds: i64, body: &[u8]) -> String {
        let mut signed = format!("{unix_seconds}.").into_bytes();
        signed.extend_from_slice(body);
        let signature = URL_SAFE_NO_PAD.encode(self.pair.sign(&signed).as_ref());
        format!("t={unix_seconds},kid={},ed25519={signature}", self.kid)
    }

    fn mac(&self, payload: &str) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.hmac_key).expect("HMAC takes a key of any length");
        mac.update(payload.as_bytes());
        mac
    }

    /// A token for subscription `id`'s wake `generation`, made at `now` (Unix seconds).
    pub fn token(&self, id: &str, generation: i64, now: i64) -> String {
        let claims = Claims {
            sub: format!("subscription:{id}"),
            epoch: generation,
            exp: now + TOKEN_SECONDS,
            jti: uuid::Uuid::new_v4().simple().to_string(),
        };
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).expect("claims serialize"));
        let signature = URL_SAFE_NO_PAD.encode(self.mac(&payload).finalize().into_bytes());
        format!("{payload}.{signature}")
    }

    /// The claims of `token` if it is ours, for subscription `id`, and not expired at `now`.
    pub fn verify(&self, token: &str, id: &str, now: i64) -> Result<Claims, TokenRefusal> {
        let (payload, signature) = token.split_once('.').ok_or(TokenRefusal::Invalid)?;
        let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| TokenRefusal::Invalid)?;
        self.mac(payload).verify_slice(&signature).map_err(|_| TokenRefusal::Invalid)?;
        let claims: Claims = URL_SAFE_NO_PAD
            .decode(payload)
            .ok()
            .and_then(|json| serde_json::from_slice(&json).ok())
            .ok_or(TokenRefusal::Invalid)?;
        if claims.sub != format!("subscription:{id}") {
            return Err(TokenRefusal::Invalid);
        }
        if claims.exp <= now {
            return Err(TokenRefusal::Expired);
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{ED25519, UnparsedPublicKey};

    fn keys() -> Keys {
        Keys::new(&[7u8; 32], vec![9u8; 32]).unwrap()
    }

    #[test]
    fn a_webhook_signature_verifies_against_the_jwks_key() {
        let keys = keys();
        let header = keys.webhook_signature(1_700_000_000, br#"{"a":1}"#);
        let (rest, signature) = header.rsplit_once(",ed25519=").unwrap();
        assert_eq!(rest, format!("t=1700000000,kid={}", keys.kid()));
        let jwk = &keys.jwks()["keys"][0];
        assert_eq!((jwk["kid"].as_str(), jwk["alg"].as_str()), (Some(keys.kid()), Some("EdDSA")));
        let public = URL_SAFE_NO_PAD.decode(jwk["x"].as_str().unwrap()).unwrap();
        let signature = URL_SAFE_NO_PAD.decode(signature).unwrap();
        UnparsedPublicKey::new(&ED25519, public).verify(br#"1700000000.{"a":1}"#, &signature).expect("verifies");
        assert!(keys.kid().starts_with("ds_"));
    }

    #[test]
    fn a_token_is_taken_for_its_subscription_until_it_expires() {
        let keys = keys();
        let token = keys.token("s1", 3, 1000);
        assert_eq!(keys.verify(&token, "s1", 1001).map(|c| c.epoch), Ok(3));
        assert_eq!(keys.verify(&token, "s2", 1001), Err(TokenRefusal::Invalid));
        assert_eq!(keys.verify(&token, "s1", 1000 + TOKEN_SECONDS), Err(TokenRefusal::Expired));
        let forged = format!("{}x", token);
        assert_eq!(keys.verify(&forged, "s1", 1001), Err(TokenRefusal::Invalid));
        let other = Keys::new(&[7u8; 32], vec![1u8; 32]).unwrap();
        assert_eq!(other.verify(&token, "s1", 1001), Err(TokenRefusal::Invalid));
    }
}
