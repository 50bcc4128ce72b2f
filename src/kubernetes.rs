//! The Kubernetes API client shared by Query status patching and `--auth kubernetes`: `--kube-api-url`
//! (tests, local development) or the in-cluster / kubeconfig configuration.

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum KubeSetupError {
    /// `--kube-api-url` is not a URL.
    #[error("invalid --kube-api-url: {0}")]
    InvalidUrl(String),
    /// Neither in-cluster configuration nor a kubeconfig was found.
    #[error("no Kubernetes configuration found (in-cluster or kubeconfig)")]
    NotFound,
    /// The configuration was found but is unusable.
    #[error("cannot build a Kubernetes client: {0}")]
    Client(String),
}

/// A client for `api_url` (used without credentials), or else the inferred cluster.
pub async fn client(api_url: Option<&str>) -> Result<kube::Client, KubeSetupError> {
    let config = match api_url {
        Some(url) => kube::Config::new(
            url.parse().map_err(|e: axum::http::uri::InvalidUri| KubeSetupError::InvalidUrl(e.to_string()))?,
        ),
        None => kube::Config::infer().await.map_err(|_| KubeSetupError::NotFound)?,
    };
    kube::Client::try_from(config).map_err(|e| KubeSetupError::Client(e.to_string()))
}
