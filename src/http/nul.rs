//! Refuses NUL bytes in path parameters and query parameters before any handler runs: Postgres text cannot
//! hold them, so a handler would fail with a 500 where the client deserves a 400 naming the parameter.

use axum::{
    extract::{RawPathParams, Request, rejection::RawPathParamsRejection},
    middleware::Next,
    response::{IntoResponse, Response},
};

use crate::error::ApiError;

/// The middleware (a `route_layer`, so the matched route's parameter names are known).
pub async fn refuse_nul(
    params: Result<RawPathParams, RawPathParamsRejection>,
    request: Request,
    next: Next,
) -> Response {
    let in_path = params.iter().flat_map(|params| params.iter()).find(|(_, value)| value.contains('\0'));
    if let Some((name, _)) = in_path {
        return ApiError::Validation(format!("{name}: must not contain NUL")).into_response();
    }
    let query = request.uri().query().unwrap_or_default();
    if query.contains("%00") || query.contains('\0') {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
        if let Some((name, _)) = pairs.iter().find(|(name, value)| name.contains('\0') || value.contains('\0')) {
            let name = name.replace('\0', "\\0");
            return ApiError::Validation(format!("{name}: must not contain NUL")).into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use axum::{Router, body::Body, http::StatusCode, middleware, routing::get};
    use tower::ServiceExt;

    use super::refuse_nul;

    async fn status(uri: &str) -> StatusCode {
        let app =
            Router::new().route("/things/{id}", get(|| async { "ok" })).route_layer(middleware::from_fn(refuse_nul));
        let request = axum::http::Request::builder().uri(uri).body(Body::empty()).unwrap();
        app.oneshot(request).await.unwrap().status()
    }

    #[tokio::test]
    async fn nul_in_a_path_or_query_parameter_is_a_400() {
        assert_eq!(status("/things/a%00b").await, StatusCode::BAD_REQUEST);
        assert_eq!(status("/things/a?cursor=%00").await, StatusCode::BAD_REQUEST);
        assert_eq!(status("/things/a?cursor=1&x=%2500").await, StatusCode::OK, "an encoded percent sign is not NUL");
        assert_eq!(status("/things/a?cursor=1").await, StatusCode::OK);
    }
}
