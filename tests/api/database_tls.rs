//! TLS to a PostgreSQL with its own CA (`--database-ssl-root-cert`, upstream's `DATABASE_SSL_ROOT_CERT_PATH`):
//! a server of the test's own with `ssl=on` and a certificate from a CA made with `openssl`. With that CA the
//! broker connects over verified TLS, whatever the URL's `sslmode`; with another CA, or asking for
//! verification without one, or naming a file that is not there, start-up fails saying why.

use std::{path::Path, process::Command};

use ark_broker::{app, config::Config};

use crate::support::OwnServer;

/// Runs `openssl` with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl runs");
    assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

/// A CA (`ca.crt`), a server certificate it signed for 127.0.0.1 (`server.crt`, `server.key`), and another CA
/// that signed nothing of the server's (`other.crt`), in a fresh directory the server's user can read, removed
/// when the returned guard drops.
fn certificates() -> tempfile::TempDir {
    let guard = tempfile::Builder::new().prefix("ark-broker-tls-").tempdir().unwrap();
    let dir = guard.path();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    for (name, subject) in [("ca", "/CN=ark-broker test CA"), ("other", "/CN=another CA")] {
        let (key, crt) = (format!("{name}.key"), format!("{name}.crt"));
        let ca = ["req", "-x509", "-days", "2", "-subj", subject, "-keyout", &key, "-out", &crt];
        openssl(dir, &[&ca[..], &ec, &["-addext", "basicConstraints=critical,CA:TRUE"]].concat());
    }
    openssl(
        dir,
        &[&["req", "-subj", "/CN=127.0.0.1", "-keyout", "server.key", "-out", "server.csr"][..], &ec].concat(),
    );
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ],
    );
    // PostgreSQL takes a key only its own user can read; run as root, the server runs as `postgres`.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("server.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
    if unsafe { libc::geteuid() } == 0 {
        let owned = Command::new("chown").arg("-R").arg("postgres").arg(dir).status().expect("chown runs");
        assert!(owned.success(), "chown the certificates to postgres");
    }
    guard
}

/// A broker's start-up on `url` with `root_cert`: the error it stops with, if it does.
async fn start(url: &str, root_cert: Option<&Path>) -> Result<app::AppState, String> {
    let mut config = Config::for_database(url);
    config.database_ssl_root_cert = root_cert.map(Path::to_path_buf);
    app::build_state(config, url).await.map_err(|error| error.to_string())
}

#[tokio::test]
async fn a_postgresql_with_its_own_ca_is_reached_over_verified_tls_only_with_that_ca() {
    let certificates = certificates();
    let dir = certificates.path();
    let file = |name: &str| dir.join(name).display().to_string();
    let settings = [
        "ssl=on".to_owned(),
        format!("ssl_cert_file={}", file("server.crt")),
        format!("ssl_key_file={}", file("server.key")),
    ];
    let (_server, url) = OwnServer::start_with(settings.to_vec()).await;
    let ca = dir.join("ca.crt");

    // The CA: every connection is TLS, even where the URL would settle for less.
    for url in [url.clone(), format!("{url}?sslmode=prefer")] {
        let state = start(&url, Some(&ca)).await.unwrap_or_else(|error| panic!("{url}: {error}"));
        let ssl: bool = sqlx::query_scalar("select ssl from pg_stat_ssl where pid = pg_backend_pid()")
            .fetch_one(&state.pool)
            .await
            .unwrap();
        assert!(ssl, "{url}: the pool's connection is TLS");
        state.shutdown.cancel();
    }

    // Another CA: the certificate is refused, whatever the URL says, and start-up says it cannot connect.
    for url in [url.clone(), format!("{url}?sslmode=require")] {
        let refused = start(&url, Some(&dir.join("other.crt"))).await.expect_err("another CA is refused");
        assert!(refused.starts_with("cannot connect to PostgreSQL: "), "{refused}");
        assert!(refused.contains("certificate"), "it names the certificate: {refused}");
    }
    // Verification asked for with no CA of ours: the public roots do not know the test's CA.
    let refused = start(&format!("{url}?sslmode=verify-full"), None).await.expect_err("no CA, no trust");
    assert!(refused.starts_with("cannot connect to PostgreSQL: ") && refused.contains("certificate"), "{refused}");
    // A file that is not there stops start-up naming it and the setting.
    let missing = dir.join("missing.crt");
    let refused = start(&url, Some(&missing)).await.expect_err("a missing CA file");
    assert!(refused.contains(&missing.display().to_string()) && refused.contains("DATABASE_SSL_ROOT_CERT_PATH"));
}
