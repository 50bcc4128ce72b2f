//! `--answer-policy kubernetes`: whether a principal may answer a question is Kubernetes RBAC's call — a
//! SubjectAccessReview (`authorization.k8s.io/v1`) asks whether the principal, with its groups, may `update`
//! `queries` (`ark.mckinsey.com`) in the question's namespace. The broker's ServiceAccount needs the right to
//! create SubjectAccessReviews (`system:auth-delegator`, which the chart binds with `auth.mode: kubernetes`).
//! Verdicts are kept for a few seconds per principal and namespace: a page of questions from one namespace
//! asks once, and a change of RBAC counts soon after.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{Api, PostParams};

use super::Principal;

/// Longest wait for the API server's verdict.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);
/// The API group of Ark's Query resource.
pub const QUERY_GROUP: &str = "ark.mckinsey.com";
/// How long a verdict is reused.
const VERDICT_TTL: Duration = Duration::from_secs(5);
/// Most verdicts kept; beyond it they are all dropped.
const CACHE_CAPACITY: usize = 10_000;

/// Verdicts by principal and namespace: when each expires, and whether it was allowed.
type Verdicts = HashMap<(Principal, String), (Instant, bool)>;

/// Asks the Kubernetes API who may act on Queries.
#[derive(Clone)]
pub struct AccessReviewer {
    reviews: Api<SubjectAccessReview>,
    verdicts: Arc<Mutex<Verdicts>>,
}

impl std::fmt::Debug for AccessReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessReviewer").finish_non_exhaustive()
    }
}

impl AccessReviewer {
    /// Reviews through `client`.
    pub fn new(client: kube::Client) -> Self {
        AccessReviewer { reviews: Api::all(client), verdicts: Arc::default() }
    }

    /// Whether `principal` may `update` `queries` in `namespace` (a verdict of the last few seconds, or a new
    /// review); `Err` says why it could not be asked.
    pub async fn may_update_queries(&self, principal: &Principal, namespace: &str) -> Result<bool, String> {
        let key = (principal.clone(), namespace.to_owned());
        let now = Instant::now();
        if let Some((expires, allowed)) = self.verdicts.lock().unwrap_or_else(PoisonError::into_inner).get(&key)
            && *expires > now
        {
            return Ok(*allowed);
        }
        let allowed = self.review(principal, namespace).await?;
        let mut verdicts = self.verdicts.lock().unwrap_or_else(PoisonError::into_inner);
        if verdicts.len() >= CACHE_CAPACITY {
            verdicts.clear();
        }
        verdicts.insert(key, (now + VERDICT_TTL, allowed));
        Ok(allowed)
    }

    async fn review(&self, principal: &Principal, namespace: &str) -> Result<bool, String> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(principal.name().to_owned()),
                groups: (!principal.groups().is_empty()).then(|| principal.groups().to_vec()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(QUERY_GROUP.into()),
                    resource: Some("queries".into()),
                    verb: Some("update".into()),
                    namespace: Some(namespace.to_owned()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let created = tokio::time::timeout(REVIEW_TIMEOUT, self.reviews.create(&PostParams::default(), &review))
            .await
            .map_err(|_| format!("the Kubernetes API gave no answer within {REVIEW_TIMEOUT:?}"))?;
        match created {
            Ok(reviewed) => Ok(reviewed.status.is_some_and(|status| status.allowed)),
            Err(kube::Error::Api(status)) if matches!(status.code, 401 | 403) => Err(format!(
                "the Kubernetes API refused the broker's SubjectAccessReview ({}): give the broker's \
                 ServiceAccount the system:auth-delegator ClusterRole",
                status.code
            )),
            Err(error) => Err(format!("SubjectAccessReview failed: {error}")),
        }
    }
}
