//! A test's own small network: PostgreSQL, broker replicas and a client, each in its own network namespace,
//! joined by two bridges in the test's namespace — a client network (the test and the client reach the
//! replicas) and a database network (the replicas and the test reach PostgreSQL). A link is cut by taking its
//! bridge end down: the host's end stays up, and what it sends vanishes, with no reset (a partition as a
//! cluster has one). Needs root (`ip netns`, veth, bridges); everything is removed on drop.

use std::{
    net::SocketAddr,
    os::fd::AsRawFd,
    path::PathBuf,
    process::Command,
    sync::atomic::{AtomicU32, Ordering},
};

use super::Replica;

/// Which host a link joins to its network.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Link {
    /// PostgreSQL's one link (the database network).
    Postgres,
    /// Replica `i`'s link to the database network (its client link stays).
    ReplicaToDatabase(usize),
    /// The client host's link to the client network.
    Client,
}

/// A running lab.
pub struct Lab {
    id: String,
    subnet: u32,
    replicas: usize,
    dir: PathBuf,
}

static LABS: AtomicU32 = AtomicU32::new(0);

fn run(program: &str, args: &[&str]) {
    let output = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn ip(args: &[&str]) {
    run("ip", args);
}

impl Lab {
    /// Builds the network for `replicas` replicas and a client, and starts PostgreSQL in it with a database
    /// `broker`.
    pub async fn start(replicas: usize) -> Self {
        // SAFETY: geteuid has no preconditions.
        assert_eq!(unsafe { libc::geteuid() }, 0, "network namespaces need root: run the tests as root (CI does)");
        let n = LABS.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        // Third octets apart for labs of this process and, very likely, of another test process.
        let subnet = (pid.wrapping_mul(7) + n * 31) % 250 + 2;
        let id = format!("ak{:04}{n}", pid % 10_000);
        let dir = std::env::temp_dir().join(format!("ark-lab-{id}"));
        let lab = Lab { id, subnet, replicas, dir };
        for (bridge, address) in [(lab.bridge('c'), lab.address('c', 1)), (lab.bridge('d'), lab.address('d', 1))] {
            ip(&["link", "add", &bridge, "type", "bridge"]);
            ip(&["addr", "add", &format!("{address}/24"), "dev", &bridge]);
            ip(&["link", "set", &bridge, "up"]);
        }
        lab.host("pg", &[('d', 10)]);
        for i in 0..replicas {
            lab.host(&format!("r{i}"), &[('c', 11 + i as u32), ('d', 11 + i as u32)]);
        }
        lab.host("cl", &[('c', 50)]);
        lab.start_postgres();
        lab
    }

    fn bridge(&self, net: char) -> String {
        format!("{}b{net}", self.id)
    }

    /// `198.18.<subnet>.<host>` on the client network, `198.19.<subnet>.<host>` on the database network
    /// (RFC 2544's benchmarking range: no real network uses it).
    fn address(&self, net: char, host: u32) -> String {
        format!("198.{}.{}.{host}", if net == 'c' { 18 } else { 19 }, self.subnet)
    }

    fn namespace(&self, host: &str) -> String {
        format!("{}{host}", self.id)
    }

    /// The bridge end of `host`'s link to `net`.
    fn link_end(&self, host: &str, net: char) -> String {
        format!("{}{host}{net}", self.id)
    }

    fn host(&self, host: &str, links: &[(char, u32)]) {
        let namespace = self.namespace(host);
        ip(&["netns", "add", &namespace]);
        ip(&["-n", &namespace, "link", "set", "lo", "up"]);
        for &(net, number) in links {
            let (end, inside) = (self.link_end(host, net), format!("eth{net}"));
            ip(&["link", "add", &end, "type", "veth", "peer", "name", &inside, "netns", &namespace]);
            ip(&["link", "set", &end, "master", &self.bridge(net), "up"]);
            ip(&["-n", &namespace, "addr", "add", &format!("{}/24", self.address(net, number)), "dev", &inside]);
            ip(&["-n", &namespace, "link", "set", &inside, "up"]);
        }
    }

    fn start_postgres(&self) {
        std::fs::create_dir_all(&self.dir).unwrap();
        run("chown", &["postgres", self.dir.to_str().unwrap()]);
        let data = self.dir.join("data");
        let data = data.to_str().unwrap();
        run(
            "runuser",
            &["-u", "postgres", "--", "initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"],
        );
        // Every host of the lab may connect, without a password (the database network is the lab's own).
        let mut hba = std::fs::OpenOptions::new().append(true).open(self.dir.join("data/pg_hba.conf")).unwrap();
        std::io::Write::write_all(&mut hba, b"host all all 0.0.0.0/0 trust\n").unwrap();
        let settings = format!(
            "-c listen_addresses={} -p 5432 -c unix_socket_directories={} -c max_connections=200 -c fsync=off",
            self.address('d', 10),
            self.dir.display()
        );
        let log = self.dir.join("log");
        run(
            "ip",
            &["netns", "exec", &self.namespace("pg"), "runuser", "-u", "postgres", "--", "pg_ctl", "-D", data, "-l"]
                .into_iter()
                .chain([log.to_str().unwrap(), "-o", &settings, "-w", "start"])
                .collect::<Vec<_>>(),
        );
        run("psql", &["-q", "-h", &self.address('d', 10), "-U", "postgres", "-c", "create database broker"]);
    }

    /// The broker's database, as every host reaches it.
    pub fn database_url(&self) -> String {
        format!("postgres://postgres@{}:5432/broker", self.address('d', 10))
    }

    /// Starts replica `i` in its namespace, listening on its client address.
    pub async fn replica(&self, i: usize, args: &[&str]) -> Replica {
        assert!(i < self.replicas);
        let url = self.database_url();
        Replica::start_in_namespace(&self.namespace(&format!("r{i}")), &self.address('c', 11 + i as u32), &url, args)
            .await
    }

    /// Cuts `link`: packets over it vanish from now on.
    pub fn cut(&self, link: Link) {
        ip(&["link", "set", &self.end_of(link), "down"]);
    }

    /// Mends `link`.
    pub fn heal(&self, link: Link) {
        ip(&["link", "set", &self.end_of(link), "up"]);
    }

    fn end_of(&self, link: Link) -> String {
        match link {
            Link::Postgres => self.link_end("pg", 'd'),
            Link::ReplicaToDatabase(i) => self.link_end(&format!("r{i}"), 'd'),
            Link::Client => self.link_end("cl", 'c'),
        }
    }

    /// How many TCP sockets process `pid` in replica `i`'s namespace holds to the client host (sockets the
    /// kernel still winds down after the process closed them are not the process's).
    pub fn sockets_to_client(&self, i: usize, pid: u32) -> usize {
        let client = self.address('c', 50);
        let output = Command::new("ip")
            .args(["netns", "exec", &self.namespace(&format!("r{i}")), "ss", "-Htanp", "dst", &client])
            .output()
            .expect("run ss");
        assert!(output.status.success(), "ss: {}", String::from_utf8_lossy(&output.stderr));
        let owner = format!("pid={pid},");
        String::from_utf8_lossy(&output.stdout).lines().filter(|line| line.contains(&owner)).count()
    }

    /// A TCP connection from the client host to `address` (e.g. a replica's `host:port`).
    pub async fn connect_from_client(&self, address: &str) -> tokio::net::TcpStream {
        let address: SocketAddr = address.parse().expect("host:port");
        let namespace = PathBuf::from("/run/netns").join(self.namespace("cl"));
        let stream = tokio::task::spawn_blocking(move || {
            // A thread of its own enters the namespace; the socket keeps it after the thread is gone.
            let handle = std::thread::spawn(move || {
                let file = std::fs::File::open(&namespace).expect("the client's namespace");
                // SAFETY: setns with an open namespace file descriptor changes only this thread's namespace.
                assert_eq!(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) }, 0, "setns");
                std::net::TcpStream::connect(address)
            });
            handle.join().expect("the connecting thread")
        })
        .await
        .unwrap()
        .expect("connect from the client host");
        stream.set_nonblocking(true).unwrap();
        tokio::net::TcpStream::from_std(stream).unwrap()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = Command::new("ip")
            .args(["netns", "exec", &self.namespace("pg"), "runuser", "-u", "postgres", "--", "pg_ctl", "-D"])
            .arg(&data)
            .args(["-m", "immediate", "stop"])
            .output();
        let hosts = ["pg".to_owned(), "cl".to_owned()].into_iter().chain((0..self.replicas).map(|i| format!("r{i}")));
        for host in hosts {
            // Removing a namespace removes its veth ends and so their bridge ends.
            let _ = Command::new("ip").args(["netns", "del", &self.namespace(&host)]).output();
        }
        for net in ['c', 'd'] {
            let _ = Command::new("ip").args(["link", "del", &self.bridge(net)]).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
