//! A real Kubernetes API server (kube-apiserver v1.20.2 on etcd 3.4.23, built by `scripts/kube-apiserver` into
//! `.cache/kube-apiserver/current/`): one per test process, shared by its tests, each test in namespaces of its
//! own. It serves on a free loopback port with TLS (a CA and serving certificate made with `openssl`),
//! authenticates a static admin token and ServiceAccount tokens (TokenRequest, signed with a key pair this
//! module makes and so can sign with too), authorizes with RBAC, and has our Query CRD installed
//! ([`super::query_crd`]). There is no controller-manager: a ServiceAccount must be created by hand, and a
//! namespace never finishes deleting, so tests only ever make new ones.
//!
//! The processes and their directory go at process exit (`atexit`), and with the process if it is killed
//! (`PR_SET_PDEATHSIG`, from a thread that lives as long as the process).

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Mutex, OnceLock, mpsc},
    time::{Duration, Instant},
};

use base64::{Engine, engine::general_purpose::STANDARD};
use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::{Namespace, ServiceAccount},
};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use tokio::sync::OnceCell;

/// The issuer (and default audience) of the API server's ServiceAccount tokens.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// Longest wait for etcd and the API server to become ready (3–4 s on an idle machine; the suite is not idle).
const STARTUP: Duration = Duration::from_secs(90);

static SHARED: OnceCell<KubeApiServer> = OnceCell::const_new();

/// A running etcd and kube-apiserver.
pub struct KubeApiServer {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    ca_pem: Vec<u8>,
    admin_token: String,
    /// Removed by [`Self::stop`], or on drop if the start fails before there is a server to stop.
    dir: tempfile::TempDir,
    processes: Mutex<Vec<Child>>,
}

impl KubeApiServer {
    /// The process's API server, started (with the Query CRD installed) by the first test that asks.
    pub async fn shared() -> &'static KubeApiServer {
        SHARED
            .get_or_init(|| async {
                let server = KubeApiServer::start().await;
                super::query_crd::install(&server.admin().await).await;
                // SAFETY: registering a plain extern "C" function with atexit has no preconditions.
                unsafe { libc::atexit(stop_shared) };
                server
            })
            .await
    }

    async fn start() -> Self {
        super::install_tls_provider();
        let bin = binaries();
        let prefix = format!("ark-broker-kube-{}-", std::process::id());
        let dir = tempfile::Builder::new().prefix(&prefix).tempdir().expect("create the API server's directory");
        make_certificates(dir.path()).await;
        let admin_token = uuid::Uuid::new_v4().simple().to_string();
        std::fs::write(dir.path().join("tokens.csv"), format!("{admin_token},admin,admin-uid,\"system:masters\"\n"))
            .unwrap();
        let [etcd_client, etcd_peer, secure] = [free_port(), free_port(), free_port()];
        let file = |name: &str| dir.path().join(name).to_str().expect("a UTF-8 path").to_owned();
        let mut etcd = Command::new(bin.join("etcd"));
        etcd.args(["--name", "test", "--data-dir", &file("etcd")])
            .arg(format!("--listen-client-urls=http://127.0.0.1:{etcd_client}"))
            .arg(format!("--advertise-client-urls=http://127.0.0.1:{etcd_client}"))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{etcd_peer}"))
            .arg(format!("--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}"))
            .arg(format!("--initial-cluster=test=http://127.0.0.1:{etcd_peer}"));
        let mut apiserver = Command::new(bin.join("kube-apiserver"));
        apiserver
            .arg(format!("--etcd-servers=http://127.0.0.1:{etcd_client}"))
            .args(["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--insecure-port=0"])
            .arg(format!("--secure-port={secure}"))
            .arg(format!("--cert-dir={}", file("certs")))
            .arg(format!("--tls-cert-file={}", file("server.crt")))
            .arg(format!("--tls-private-key-file={}", file("server.key")))
            .arg(format!("--client-ca-file={}", file("ca.crt")))
            .args(["--anonymous-auth=false", "--authorization-mode=RBAC"])
            .arg(format!("--token-auth-file={}", file("tokens.csv")))
            .arg(format!("--service-account-issuer={ISSUER}"))
            .arg(format!("--api-audiences={ISSUER}"))
            .arg(format!("--service-account-key-file={}", file("sa.pub")))
            .arg(format!("--service-account-signing-key-file={}", file("sa.key")))
            .args(["--service-cluster-ip-range=10.0.0.0/24", "--enable-priority-and-fairness=false"]);
        let server = KubeApiServer {
            url: format!("https://127.0.0.1:{secure}"),
            ca_pem: std::fs::read(dir.path().join("ca.crt")).unwrap(),
            admin_token,
            processes: Mutex::new(vec![spawn(etcd, &dir.path().join("etcd.log"))]),
            dir,
        };
        server.processes.lock().unwrap().push(spawn(apiserver, &server.dir.path().join("kube-apiserver.log")));
        server.wait_ready().await;
        server
    }

    /// Polls `/readyz` (nothing signals readiness), failing with the logs if a process exits or it takes too long.
    async fn wait_ready(&self) {
        let client = self.admin().await;
        let started = Instant::now();
        loop {
            let request = axum::http::Request::get("/readyz").body(Vec::new()).unwrap();
            if client.request_text(request).await.is_ok_and(|body| body.trim() == "ok") {
                return;
            }
            if let Some(exited) = self.processes.lock().unwrap().iter_mut().find_map(|p| p.try_wait().unwrap()) {
                panic!("a Kubernetes process exited ({exited}) before the API server was ready:\n{}", self.logs());
            }
            assert!(started.elapsed() < STARTUP, "the API server was not ready within {STARTUP:?}:\n{}", self.logs());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The end of both processes' logs, for failure messages.
    pub fn logs(&self) -> String {
        ["etcd.log", "kube-apiserver.log"]
            .iter()
            .map(|name| {
                let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(30).collect();
                format!("--- {name} (last lines)\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A kubeconfig (JSON, which is YAML) for `token` with CA checking, as a cluster's user would have.
    pub fn kubeconfig(&self, token: &str) -> String {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url, "certificate-authority-data": STANDARD.encode(&self.ca_pem)}}],
            "users": [{"name": "user", "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "user"}}],
        })
        .to_string()
    }

    /// Writes [`Self::kubeconfig`] to a file (removed with the server's directory) and returns its path.
    pub fn kubeconfig_file(&self, token: &str) -> PathBuf {
        let path = self.dir.path().join(format!("kubeconfig-{}", uuid::Uuid::new_v4()));
        std::fs::write(&path, self.kubeconfig(token)).unwrap();
        path
    }

    /// A client for `token` (on the calling test's runtime).
    pub async fn client(&self, token: &str) -> Client {
        let kubeconfig = Kubeconfig::from_yaml(&self.kubeconfig(token)).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.unwrap();
        Client::try_from(config).unwrap()
    }

    /// A client with the static admin token (`system:masters`).
    pub async fn admin(&self) -> Client {
        self.client(&self.admin_token).await
    }

    /// Creates a namespace named `<prefix>-<random>` and returns its name.
    pub async fn namespace(&self, prefix: &str) -> String {
        let name = format!("{prefix}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let namespace =
            Namespace { metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() }, ..Default::default() };
        Api::<Namespace>::all(self.admin().await).create(&PostParams::default(), &namespace).await.unwrap();
        name
    }

    /// Creates ServiceAccount `name` in `namespace` (what the controller-manager would do for `default`).
    pub async fn service_account(&self, namespace: &str, name: &str) {
        let account = ServiceAccount {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            ..Default::default()
        };
        Api::<ServiceAccount>::namespaced(self.admin().await, namespace)
            .create(&PostParams::default(), &account)
            .await
            .unwrap();
    }

    /// A real token of ServiceAccount `namespace/name` from a TokenRequest: for `audiences` (none: the API
    /// server's own), valid for `seconds`.
    pub async fn token(&self, namespace: &str, name: &str, audiences: &[&str], seconds: i64) -> String {
        self.try_token(namespace, name, audiences, seconds).await.unwrap_or_else(|refused| panic!("{refused}"))
    }

    /// Like [`Self::token`], or why the API server refused it.
    pub async fn try_token(
        &self,
        namespace: &str,
        name: &str,
        audiences: &[&str],
        seconds: i64,
    ) -> Result<String, String> {
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(audiences.iter().map(|a| (*a).to_owned()).collect()),
                expiration_seconds: Some(seconds),
                ..Default::default()
            }),
            ..Default::default()
        };
        let api = Api::<ServiceAccount>::namespaced(self.admin().await, namespace);
        match api.create_token_request(name, &PostParams::default(), &request).await {
            Ok(issued) => Ok(issued.status.and_then(|s| s.token).expect("an issued token")),
            Err(error) => Err(error.to_string()),
        }
    }

    /// `token` with its claims changed by `edit` and signed again with the API server's ServiceAccount key (the
    /// header, and so the key id, stay): a token the API server would have issued with those claims.
    pub async fn resign(&self, token: &str, edit: impl FnOnce(&mut serde_json::Value)) -> String {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
        let mut parts = token.split('.');
        let (header, payload) = (parts.next().unwrap(), parts.next().unwrap());
        let mut claims: serde_json::Value = serde_json::from_slice(&B64.decode(payload).unwrap()).unwrap();
        edit(&mut claims);
        let signed = format!("{header}.{}", B64.encode(claims.to_string()));
        let input = self.dir.path().join(format!("jwt-{}", uuid::Uuid::new_v4()));
        std::fs::write(&input, &signed).unwrap();
        let output = tokio::process::Command::new("openssl")
            .args(["dgst", "-sha256", "-sign"])
            .arg(self.dir.path().join("sa.key"))
            .arg(&input)
            .output()
            .await
            .expect("run openssl");
        assert!(output.status.success(), "openssl dgst: {}", String::from_utf8_lossy(&output.stderr));
        format!("{signed}.{}", B64.encode(output.stdout))
    }

    fn stop(&self) {
        let mut processes = self.processes.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // The API server first, then etcd.
        for mut process in processes.drain(..).rev() {
            let _ = process.kill();
            let _ = process.wait();
        }
        // The shared server is a static, never dropped: its directory goes here, at exit.
        let _ = std::fs::remove_dir_all(self.dir.path());
    }
}

impl Drop for KubeApiServer {
    fn drop(&mut self) {
        self.stop();
    }
}

extern "C" fn stop_shared() {
    if let Some(server) = SHARED.get() {
        server.stop();
    }
}

/// `.cache/kube-apiserver/current`, failing the test with how to get it when it is missing.
fn binaries() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/kube-apiserver/current");
    for binary in ["kube-apiserver", "etcd"] {
        assert!(
            dir.join(binary).exists(),
            "{} is missing: ./scripts/test builds it (or run scripts/kube-apiserver: 5–12 minutes on two cores, once)",
            dir.join(binary).display()
        );
    }
    dir
}

/// A CA, a serving certificate for 127.0.0.1 and localhost signed by it, and the ServiceAccount key pair.
async fn make_certificates(dir: &Path) {
    let extensions =
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n";
    std::fs::write(dir.join("server.ext"), extensions).unwrap();
    let ca = "req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=ark-broker-test-ca \
              -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign";
    openssl(dir, ca).await;
    openssl(dir, "req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost").await;
    openssl(
        dir,
        "x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile server.ext",
    )
    .await;
    openssl(dir, "genrsa -out sa.key 2048").await;
    openssl(dir, "rsa -in sa.key -pubout -out sa.pub").await;
}

/// Runs `openssl` with `args` (split at spaces) in `dir`.
async fn openssl(dir: &Path, args: &str) {
    let output = tokio::process::Command::new("openssl")
        .args(args.split_whitespace())
        .current_dir(dir)
        .output()
        .await
        .expect("run openssl (Debian's openssl package)");
    assert!(output.status.success(), "openssl {args}: {}", String::from_utf8_lossy(&output.stderr));
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Starts `command` with its output in `log`, killed when this process dies. `PR_SET_PDEATHSIG` fires when the
/// *thread* that forked the child ends, and a test's thread ends with the test, so one thread that lives as
/// long as the process forks them all.
fn spawn(mut command: Command, log: &Path) -> Child {
    use std::os::unix::process::CommandExt;
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::spawn(move || {
            for (mut command, reply) in rx {
                let _ = reply.send(command.spawn());
            }
        });
        Mutex::new(tx)
    });
    let log = std::fs::File::create(log).unwrap();
    command.stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log);
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let (reply, result) = mpsc::channel();
    spawner.lock().unwrap().send((command, reply)).unwrap();
    result.recv().unwrap().unwrap_or_else(|e| panic!("start a Kubernetes process: {e}"))
}
