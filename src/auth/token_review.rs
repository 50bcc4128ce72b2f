//! `--auth kubernetes`: a bearer token is checked with a TokenReview (`authentication.k8s.io/v1`) against the
//! configured audiences; the principal is the user name the API server reports (a ServiceAccount's
//! `system:serviceaccount:<namespace>:<name>`). Verdicts are cached briefly by the token's digest, so a busy
//! executor does not cost a review per request.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

use super::Principal;

/// Longest wait for the API server's verdict; a caller then gets 503 rather than hanging with it.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);
/// Most verdicts kept; beyond it the expired and refused ones go, and if that is not enough, all of them.
const CACHE_CAPACITY: usize = 10_000;

/// Cached verdicts by the token's SHA-256 digest: when each expires, and the principal (`None`: refused).
type VerdictCache = HashMap<[u8; 32], (Instant, Option<Principal>)>;

/// Why a token could not be checked (the caller's token may well be valid: the answer is 503, not 401).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The API server refused the broker's own request (its ServiceAccount lacks the right to review).
    #[error(
        "the Kubernetes API refused the broker's TokenReview ({code}): give the broker's ServiceAccount the \
         system:auth-delegator ClusterRole"
    )]
    Refused {
        /// 401 or 403.
        code: u16,
    },
    /// The API server could not be reached or failed.
    #[error("TokenReview failed: {0}")]
    Failed(String),
}

/// Checks tokens with the Kubernetes API.
#[derive(Clone)]
pub struct TokenReviewer {
    reviews: Api<TokenReview>,
    audiences: Arc<Vec<String>>,
    ttl: Duration,
    cache: Arc<Mutex<VerdictCache>>,
}

impl std::fmt::Debug for TokenReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenReviewer").field("audiences", &self.audiences).field("ttl", &self.ttl).finish()
    }
}

impl TokenReviewer {
    /// Reviews through `client`, requiring one of `audiences` (none: the API server's own), caching for `ttl`.
    pub fn new(client: kube::Client, audiences: Vec<String>, ttl: Duration) -> Self {
        TokenReviewer { reviews: Api::all(client), audiences: Arc::new(audiences), ttl, cache: Arc::default() }
    }

    /// The principal of `token`, `None` when the API server does not authenticate it for our audiences.
    pub async fn principal_of(&self, token: &str) -> Result<Option<Principal>, ReviewError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(verdict) = self.cached(&key) {
            return Ok(verdict);
        }
        let verdict = self.review(token).await?;
        let mut cache = self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if cache.len() >= CACHE_CAPACITY {
            // Refused verdicts go first: a flood of made-up tokens must not evict the callers that are valid.
            let now = Instant::now();
            cache.retain(|_, (expires, verdict)| *expires > now && verdict.is_some());
            if cache.len() >= CACHE_CAPACITY {
                cache.clear();
            }
        }
        cache.insert(key, (Instant::now() + self.ttl, verdict.clone()));
        Ok(verdict)
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Option<Principal>> {
        let cache = self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        cache.get(key).filter(|(expires, _)| *expires > Instant::now()).map(|(_, verdict)| verdict.clone())
    }

    async fn review(&self, token: &str) -> Result<Option<Principal>, ReviewError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: (!self.audiences.is_empty()).then(|| self.audiences.to_vec()),
            },
            ..Default::default()
        };
        let created = tokio::time::timeout(REVIEW_TIMEOUT, self.reviews.create(&PostParams::default(), &review))
            .await
            .map_err(|_| ReviewError::Failed(format!("no answer within {REVIEW_TIMEOUT:?}")))?;
        let reviewed = created.map_err(|error| match error {
            kube::Error::Api(status) if matches!(status.code, 401 | 403) => ReviewError::Refused { code: status.code },
            other => ReviewError::Failed(other.to_string()),
        })?;
        let Some(status) = reviewed.status else { return Ok(None) };
        if status.authenticated != Some(true) {
            return Ok(None);
        }
        // An audience-aware API server names the audiences the token is valid for; one of ours must be there.
        // (An empty list would mean the server ignored ours and checked its own: not good enough.)
        if !self.audiences.is_empty() {
            let granted = status.audiences.unwrap_or_default();
            if !granted.iter().any(|audience| self.audiences.contains(audience)) {
                return Ok(None);
            }
        }
        let Some(user) = status.user else { return Ok(None) };
        let groups = user.groups.unwrap_or_default();
        Ok(user.username.filter(|name| !name.is_empty()).map(|name| Principal::with_groups(&name, groups)))
    }
}
