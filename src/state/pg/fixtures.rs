//! Test fixtures: databases of their own for one test, on the PostgreSQL server `.ci/run`
//! starts.

use postgres::Client;

/// A database of its own for one test, dropped afterwards. PostgreSQL must be running
/// (`.ci/run` installs and starts it); a test that cannot reach it fails and says how.
pub(crate) struct TestDb {
    pub url: String,
    pub name: String,
}

impl TestDb {
    pub const SOCKET: &'static str = "/var/run/postgresql";

    pub fn create() -> TestDb {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "wip_unit_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = Self::admin();
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create the test database");
        TestDb {
            url: format!("postgresql:///{name}?host={}", Self::SOCKET),
            name,
        }
    }

    /// Cut every connection to this database, as a server restart would.
    pub fn cut_connections(&self) {
        Self::admin()
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                &[&self.name],
            )
            .expect("terminate the test database's connections");
    }

    pub fn admin() -> Client {
        let url = format!("postgresql:///postgres?host={}", Self::SOCKET);
        Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| {
            panic!(
                "PostgreSQL is not reachable at {}: {e}. Start it as root with \
                 `apt-get install -y postgresql && pg_ctlcluster 15 main start && \
                 su postgres -c 'createuser -s root'` (.ci/run does this)",
                Self::SOCKET
            )
        })
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = Self::admin().batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

/// A database and a login role with a password of their own for one test, reached over
/// TCP (Debian's pg_hba.conf asks for a password on 127.0.0.1), dropped afterwards.
pub(crate) struct TcpDb {
    pub name: String,
    pub password: String,
}

impl TcpDb {
    pub fn create() -> TcpDb {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "wip_tls_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let password = format!("pw{nanos}x{}", std::process::id());
        let mut admin = TestDb::admin();
        admin
            .batch_execute(&format!("CREATE ROLE {name} LOGIN PASSWORD '{password}'"))
            .expect("create the test role");
        admin
            .batch_execute(&format!("CREATE DATABASE {name} OWNER {name}"))
            .expect("create the test database");
        TcpDb { name, password }
    }

    /// `postgresql://ROLE:PASSWORD@HOST:5432/DB?PARAMS`.
    pub fn url(&self, host: &str, params: &str) -> String {
        format!(
            "postgresql://{0}:{1}@{host}:5432/{0}?connect_timeout=10&{params}",
            self.name, self.password
        )
    }

    /// The DNS name the server's certificate carries (Debian's snakeoil: the host name
    /// of the machine it was made on), read by openssl.
    pub fn certificate_name() -> String {
        let out = std::process::Command::new("openssl")
            .args(["x509", "-noout", "-ext", "subjectAltName", "-in", SNAKEOIL])
            .output()
            .expect("run openssl");
        let text = String::from_utf8_lossy(&out.stdout);
        text.split(|c: char| c == ',' || c.is_whitespace())
            .find_map(|w| w.strip_prefix("DNS:"))
            .unwrap_or_else(|| panic!("no DNS name in {SNAKEOIL}: {text}"))
            .to_string()
    }
}

impl Drop for TcpDb {
    fn drop(&mut self) {
        let mut admin = TestDb::admin();
        let _ = admin.batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
        let _ = admin.batch_execute(&format!("DROP ROLE IF EXISTS {}", self.name));
    }
}

/// Debian's self-signed certificate, which its PostgreSQL serves (`.ci/run` makes sure).
pub(crate) const SNAKEOIL: &str = "/etc/ssl/certs/ssl-cert-snakeoil.pem";
