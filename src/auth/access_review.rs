//! `--answer-policy kubernetes`: whether a principal may answer a question is Kubernetes RBAC's call — a
//! SubjectAccessReview (`authorization.k8s.io/v1`) asks whether the principal, with its groups, may `update`
//! `queries` (`ark.mckinsey.com`) in the question's namespace. The broker's ServiceAccount needs the right to
//! create SubjectAccessReviews (`system:auth-delegator`, which the chart binds with `auth.mode: kubernetes`).

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{Api, PostParams};

use super::Principal;

/// Longest wait for the API server's verdict.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);
/// The API group of Ark's Query resource.
pub const QUERY_GROUP: &str = "ark.mckinsey.com";

/// Asks the Kubernetes API who may act on Queries.
#[derive(Clone)]
pub struct AccessReviewer {
    reviews: Api<SubjectAccessReview>,
}

impl std::fmt::Debug for AccessReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessReviewer").finish_non_exhaustive()
    }
}

impl AccessReviewer {
    /// Reviews through `client`.
    pub fn new(client: kube::Client) -> Self {
        AccessReviewer { reviews: Api::all(client) }
    }

    /// Whether `principal` may `update` `queries` in `namespace`; `Err` says why it could not be asked.
    pub async fn may_update_queries(&self, principal: &Principal, namespace: &str) -> Result<bool, String> {
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
