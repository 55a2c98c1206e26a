//! The shared state's PostgreSQL database: one connection pool per daemon, the words a
//! failure is reported with, and the listener that hears other mounts' changes.
//!
//! The world runs on plain threads (fuser's workers, the call pool), so it uses the
//! synchronous `postgres` client pooled by r2d2: a query blocks its thread exactly as a
//! rusqlite one does, with no async runtime to hand work to and back. A connection that
//! broke is dropped by the pool when it comes back, and the next `get` connects again,
//! retrying with backoff for up to `CONNECT_TIMEOUT`; meanwhile a call fails with EIO and
//! these words.
//!
//! TLS follows the URL's `sslmode` with libpq's meaning (`tls`): every
//! connection, pooled or listening, is made with the one connector built from it.
//!
//! A mount whose network goes away must cost the others nothing: every connection sets
//! TCP keepalives and `tcp_user_timeout` (so this side notices a dead peer within
//! seconds, not the kernel's two hours), and asks the server to end a transaction left
//! idle (`idle_in_transaction_session_timeout`) and a statement that runs too long
//! (`statement_timeout`), so a client that vanished mid-transaction releases its locks
//! within seconds. Reads have a pool of their own: calls waiting on the database never
//! take the connections a `cat` needs.

mod tls;

use std::path::PathBuf;
use std::time::Duration;

use postgres::Client;
use r2d2::{Pool, PooledConnection};
use r2d2_postgres::PostgresConnectionManager;

use super::{StateError, StateResult};
use tls::MakeRustlsConnect;

/// How long `get` keeps trying to (re)connect before a call fails with EIO.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections one daemon keeps at most for calls (the call threads share them).
const POOL_SIZE: u32 = 16;
/// Connections one daemon keeps at most for reads (FUSE workers share them): a pool of
/// their own, so reads never wait for calls.
const READ_POOL_SIZE: u32 = 8;
/// How often a read that met a connection cut before it (each pooled one may be, after a
/// restart) is read again on another.
pub const READ_RETRIES: u32 = READ_POOL_SIZE;
/// TCP keepalives on every connection: probe after this long idle, then every
/// `KEEPALIVE_INTERVAL`, and give up after `KEEPALIVE_RETRIES` unanswered probes.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
const KEEPALIVE_RETRIES: u32 = 3;
/// How long data sent may stay unacknowledged before the connection is given up
/// (`TCP_USER_TIMEOUT`): a request into a cut network fails after this, not minutes.
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(5);
/// What the server enforces on this client's sessions: a transaction left open and idle
/// (its client gone) is ended with its locks after `IDLE_IN_TRANSACTION`; a statement
/// runs at most `STATEMENT_TIMEOUT` (above the tracker's 10 s lock wait, whose words are
/// clearer).
pub const IDLE_IN_TRANSACTION: &str = "5s";
pub const STATEMENT_TIMEOUT: &str = "30s";
/// The listener's reconnection backoff, doubling from the first to the last.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How often the listener checks that its connection and the world are still there.
const LISTEN_TICK: Duration = Duration::from_secs(1);

/// The channel every change-feed write notifies; the payload is the writer's origin.
pub const EVENTS_CHANNEL: &str = "wip_events";

/// What the listener heard.
pub enum Heard<'a> {
    /// (Re)connected: notifications may have been missed, catch up.
    Connected,
    /// Nothing for a while (a chance to see whether the listener is still wanted).
    Quiet,
    /// A change-feed write by the mount with this origin.
    From(&'a str),
}

pub type PgClient = PooledConnection<PostgresConnectionManager<MakeRustlsConnect>>;

/// A pool of connections to the shared state database.
pub struct SharedDb {
    pool: Pool<PostgresConnectionManager<MakeRustlsConnect>>,
    /// Connections for reads only (see `reader`).
    reads: Pool<PostgresConnectionManager<MakeRustlsConnect>>,
    config: postgres::Config,
    tls: MakeRustlsConnect,
    /// What TLS the connections use, in words ("sslmode=verify-full, roots from …").
    security: String,
    /// The URL without its password, for messages.
    shown: String,
    /// What the database is to the mount, for messages ("shared state database").
    name: &'static str,
}

/// Whether a state URL names PostgreSQL (anything else is refused with words).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgresql://") || url.starts_with("postgres://")
}

/// The URL with any password replaced (in the credentials or a `password=` parameter),
/// fit for logs and `result` files.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let shown = match rest.split_once('@') {
        Some((auth, host)) => match auth.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:<redacted>@{host}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    };
    let Some((base, query)) = shown.split_once('?') else {
        return shown;
    };
    let query: Vec<&str> = query
        .split('&')
        .map(|pair| {
            if pair.starts_with("password=") {
                "password=<redacted>"
            } else {
                pair
            }
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}

impl SharedDb {
    /// Connect (once, to fail early with words) and keep a pool.
    pub fn connect(url: &str) -> StateResult<SharedDb> {
        Self::connect_as(url, "shared state database")
    }

    /// `connect`, for a database that messages call `name` (a host's own database).
    pub fn connect_as(url: &str, name: &'static str) -> StateResult<SharedDb> {
        let shown = redact_url(url);
        if !is_postgres_url(url) {
            return Err(StateError::new(format!(
                "state url {shown}: only postgresql://… URLs are supported (the default, \
                 without a url, is SQLite in the state directory)"
            )));
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let tls::Prepared {
            mut config,
            tls,
            described: security,
        } = tls::prepare(url, home.as_deref())
            .map_err(|e| StateError::new(format!("{name} {shown}: {e}")).caused_by(e))?;
        bounded(&mut config, url);
        // One connection first: its error says what went wrong, where the pool's would
        // only say it timed out after retrying for seconds.
        if let Err(e) = config.connect(tls.clone()) {
            return Err(StateError::new(match tls::explain(&e) {
                Some(words) => format!(
                    "cannot connect to the {name} {shown} securely \
                     ({security}): {words}"
                ),
                None => format!(
                    "cannot reach the {name} {shown}: {} \
                     (is PostgreSQL running and does the role exist?)",
                    tls::words(&e)
                ),
            }));
        }
        tracing::info!("{name} {shown}: {security}");
        let pool_of = |size: u32| {
            let manager = PostgresConnectionManager::new(config.clone(), tls.clone());
            Pool::builder()
                .max_size(size)
                .min_idle(Some(1))
                .connection_timeout(CONNECT_TIMEOUT)
                // A round trip per checkout would double a call's cost; a broken
                // connection shows itself on use and is dropped then.
                .test_on_check_out(false)
                .build(manager)
                .map_err(|e| {
                    StateError::new(format!(
                        "cannot reach the {name} {shown}: {e} \
                         (is PostgreSQL running and does the role exist?)"
                    ))
                })
        };
        let pool = pool_of(POOL_SIZE)?;
        let reads = pool_of(READ_POOL_SIZE)?;
        Ok(SharedDb {
            pool,
            reads,
            config,
            tls,
            security,
            shown,
            name,
        })
    }

    /// The URL as messages show it.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// What TLS the connections use, in words.
    pub fn security(&self) -> &str {
        &self.security
    }

    /// A pooled connection for a call or a write, reconnecting if need be.
    pub fn client(&self) -> StateResult<PgClient> {
        self.pooled(&self.pool)
    }

    /// A pooled connection for a read: a pool of its own, so that calls waiting on the
    /// database (for a row lock, or on a connection into a cut network) never hold what
    /// a read needs.
    pub fn reader(&self) -> StateResult<PgClient> {
        self.pooled(&self.reads)
    }

    fn pooled(
        &self,
        pool: &Pool<PostgresConnectionManager<MakeRustlsConnect>>,
    ) -> StateResult<PgClient> {
        pool.get().map_err(|e| {
            StateError::new(format!(
                "the {} {} is unreachable: {e}; the mount reconnects on the next call",
                self.name, self.shown
            ))
        })
    }

    /// A PostgreSQL error in words, as EIO.
    pub fn error(&self, what: &str, e: &postgres::Error) -> StateError {
        let detail = match e.as_db_error() {
            Some(db) => format!("{}: {}", db.code().code(), db.message()),
            None => tls::words(e),
        };
        // Connection exceptions (08…) and operator intervention (57…: a restart, a
        // terminated backend) end the connection; anything else is about the statement.
        let lost = e.is_closed()
            || e.as_db_error().is_none_or(|db| {
                let code = db.code().code();
                code.starts_with("08") || code.starts_with("57")
            });
        let hint = if lost {
            "; the connection was lost and the mount reconnects on the next call"
        } else {
            ""
        };
        StateError::new(format!(
            "{what}: the {} {} failed: {detail}{hint}",
            self.name, self.shown
        ))
    }

    /// Listen on `channel` on a connection of its own, telling `heard` what arrives.
    /// Reconnects with backoff; ends when `heard` returns false.
    pub fn listen(
        &self,
        channel: &'static str,
        mut heard: impl FnMut(Heard<'_>) -> bool + Send + 'static,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        let config = self.config.clone();
        let tls = self.tls.clone();
        let shown = self.shown.clone();
        std::thread::Builder::new()
            .name("state-listener".into())
            .spawn(move || {
                let mut backoff = BACKOFF_FIRST;
                loop {
                    match listen_once(&config, &tls, channel, &mut heard) {
                        Ok(Stop::WorldGone) => return,
                        Ok(Stop::Lost) => {
                            tracing::warn!("shared state {shown}: the listener lost its connection; reconnecting");
                            backoff = BACKOFF_FIRST;
                        }
                        Err(e) => {
                            tracing::warn!(
                                "shared state {shown}: cannot listen for other mounts' changes: {}; retrying in {backoff:?}",
                                tls::explain(&e).unwrap_or_else(|| tls::words(&e))
                            );
                            std::thread::sleep(backoff);
                            backoff = (backoff * 2).min(BACKOFF_MAX);
                            if !heard(Heard::Quiet) {
                                return;
                            }
                        }
                    }
                }
            })
    }
}

/// Keepalives, `tcp_user_timeout` and the server-side bounds of this client's
/// transactions (see the module's doc), each unless the URL sets it itself.
fn bounded(config: &mut postgres::Config, url: &str) {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    let given = |key: &str| query.split('&').any(|p| p.split('=').next() == Some(key));
    if !given("keepalives") {
        config.keepalives(true);
    }
    if !given("keepalives_idle") {
        config.keepalives_idle(KEEPALIVE_IDLE);
    }
    if !given("keepalives_interval") {
        config.keepalives_interval(KEEPALIVE_INTERVAL);
    }
    if !given("keepalives_retries") {
        config.keepalives_retries(KEEPALIVE_RETRIES);
    }
    if !given("tcp_user_timeout") {
        config.tcp_user_timeout(TCP_USER_TIMEOUT);
    }
    let mut options = config.get_options().unwrap_or("").to_string();
    for (setting, value) in [
        ("idle_in_transaction_session_timeout", IDLE_IN_TRANSACTION),
        ("statement_timeout", STATEMENT_TIMEOUT),
    ] {
        if !options.contains(setting) {
            if !options.is_empty() {
                options.push(' ');
            }
            options.push_str(&format!("-c {setting}={value}"));
        }
    }
    config.options(&options);
}

enum Stop {
    WorldGone,
    Lost,
}

fn listen_once(
    config: &postgres::Config,
    tls: &MakeRustlsConnect,
    channel: &str,
    heard: &mut impl FnMut(Heard<'_>) -> bool,
) -> Result<Stop, postgres::Error> {
    let mut client: Client = config.connect(tls.clone())?;
    client.batch_execute(&format!("LISTEN {channel}"))?;
    // Anything written while we were not listening is caught up now.
    if !heard(Heard::Connected) {
        return Ok(Stop::WorldGone);
    }
    loop {
        let mut payloads: Vec<String> = Vec::new();
        {
            use postgres::fallible_iterator::FallibleIterator;
            let mut notes = client.notifications();
            let first = notes.timeout_iter(LISTEN_TICK).next()?;
            if let Some(n) = first {
                payloads.push(n.payload().to_string());
                // Coalesce what already arrived into one catch-up.
                let mut more = notes.iter();
                while let Some(n) = more.next()? {
                    payloads.push(n.payload().to_string());
                }
            }
        }
        if client.is_closed() {
            return Ok(Stop::Lost);
        }
        if payloads.is_empty() {
            if !heard(Heard::Quiet) {
                return Ok(Stop::WorldGone);
            }
            continue;
        }
        payloads.sort();
        payloads.dedup();
        for p in &payloads {
            if !heard(Heard::From(p)) {
                return Ok(Stop::WorldGone);
            }
        }
    }
}

#[cfg(test)]
mod fixtures;
#[cfg(test)]
pub(crate) use fixtures::{TcpDb, TestDb, SNAKEOIL};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact_url("postgresql://wip:s3cret@db.example:5432/wip"),
            "postgresql://wip:<redacted>@db.example:5432/wip"
        );
        assert_eq!(
            redact_url("postgresql:///wip?host=/var/run/postgresql"),
            "postgresql:///wip?host=/var/run/postgresql"
        );
        assert_eq!(
            redact_url("postgresql://db/wip?user=wip&password=s3cret&sslmode=require"),
            "postgresql://db/wip?user=wip&password=<redacted>&sslmode=require"
        );
        assert!(!is_postgres_url("sqlite:///tmp/x"));
        assert!(SharedDb::connect("mysql://x/y").is_err());
    }

    /// Whether the connection `client` is on is encrypted, as the server sees it.
    fn encrypted(client: &mut Client) -> bool {
        client
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .unwrap()
            .get(0)
    }

    fn refused(url: &str) -> String {
        match SharedDb::connect(url) {
            Ok(_) => panic!("{url} connected"),
            Err(e) => e.to_string(),
        }
    }

    /// Every connection, for calls and for reads, asks the server to end a transaction its
    /// client left idle and to bound a statement; a URL's own options are kept beside.
    #[test]
    fn connections_bound_their_transactions_on_the_server() {
        let db = TestDb::create();
        let show = |c: &mut Client, what: &str| -> String {
            c.query_one(&format!("SHOW {what}"), &[]).unwrap().get(0)
        };
        let shared = SharedDb::connect(&db.url).unwrap();
        for mut c in [shared.client().unwrap(), shared.reader().unwrap()] {
            assert_eq!(show(&mut c, "idle_in_transaction_session_timeout"), "5s");
            assert_eq!(show(&mut c, "statement_timeout"), "30s");
        }
        let own = SharedDb::connect(&format!(
            "{}&options=-c%20statement_timeout%3D7s%20-c%20work_mem%3D8MB",
            db.url
        ))
        .unwrap();
        let mut c = own.client().unwrap();
        assert_eq!(show(&mut c, "statement_timeout"), "7s");
        assert_eq!(show(&mut c, "work_mem"), "8MB");
        assert_eq!(show(&mut c, "idle_in_transaction_session_timeout"), "5s");
        // A transaction left open (its client gone quiet) is ended by the server.
        let mut tx = c.transaction().unwrap();
        tx.execute("SELECT 1", &[]).unwrap();
        std::thread::sleep(Duration::from_millis(6500));
        assert!(tx.execute("SELECT 1", &[]).is_err(), "ended by the server");
    }

    #[test]
    fn require_and_prefer_encrypt_and_disable_does_not() {
        let db = TcpDb::create();
        for (params, tls) in [
            ("sslmode=require", true),
            ("", true),
            ("sslmode=prefer", true),
            ("sslmode=disable", false),
        ] {
            let shared = SharedDb::connect(&db.url("127.0.0.1", params)).unwrap();
            assert_eq!(encrypted(&mut shared.client().unwrap()), tls, "{params}");
        }
    }

    #[test]
    fn verify_full_connects_by_the_certificates_name_and_listens_encrypted() {
        let db = TcpDb::create();
        let name = TcpDb::certificate_name();
        let url = db.url(
            &name,
            &format!("hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={SNAKEOIL}"),
        );
        let shared = SharedDb::connect(&url).unwrap();
        assert!(shared.security().starts_with("sslmode=verify-full"));
        assert!(encrypted(&mut shared.client().unwrap()));
        // The listener's connection is encrypted too.
        let (tx, rx) = std::sync::mpsc::channel();
        let listener = shared
            .listen(EVENTS_CHANNEL, move |h| {
                if matches!(h, Heard::Connected) {
                    let _ = tx.send(());
                }
                false
            })
            .unwrap();
        rx.recv_timeout(Duration::from_secs(30)).unwrap();
        listener.join().unwrap();
        // Every connection this database has had so far was encrypted.
        let plain: i64 = TestDb::admin()
            .query_one(
                "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) \
                 WHERE datname = $1 AND NOT ssl",
                &[&db.name],
            )
            .unwrap()
            .get(0);
        assert_eq!(plain, 0);
    }

    #[test]
    fn verify_full_refuses_a_name_the_certificate_does_not_carry() {
        let db = TcpDb::create();
        let e = refused(&db.url(
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={SNAKEOIL}"),
        ));
        assert!(
            e.contains("securely (sslmode=verify-full")
                && e.contains("not valid for the host name 127.0.0.1")
                && e.contains(&TcpDb::certificate_name()),
            "{e}"
        );
        assert!(!e.contains(&db.password), "{e}");
    }

    #[test]
    fn verify_ca_checks_the_chain_and_not_the_name() {
        let db = TcpDb::create();
        // The name does not match, the chain does: connected.
        let shared = SharedDb::connect(&db.url(
            "127.0.0.1",
            &format!("sslmode=verify-ca&sslrootcert={SNAKEOIL}"),
        ))
        .unwrap();
        assert!(encrypted(&mut shared.client().unwrap()));
        // A root that did not sign the server's certificate: refused.
        let other = tempfile::tempdir().unwrap();
        let (cert, _) = self_signed(other.path(), "someone-else");
        let e = refused(&db.url(
            "127.0.0.1",
            &format!("sslmode=verify-ca&sslrootcert={}", cert.display()),
        ));
        assert!(
            e.contains("certificate failed verification")
                && e.contains("not signed by any of the root certificates"),
            "{e}"
        );
        // No root file at all: refused before connecting, saying which file.
        let e = refused(&db.url(
            "127.0.0.1",
            "sslmode=verify-ca&sslrootcert=/nonexistent/root.crt",
        ));
        assert!(
            e.contains("root certificate file /nonexistent/root.crt does not exist"),
            "{e}"
        );
    }

    #[test]
    fn require_refuses_a_server_without_tls_and_prefer_falls_back() {
        // PostgreSQL offers no TLS on its Unix socket: relayed to TCP, that is a server
        // without TLS (peer authentication sees this process, as root).
        let db = TestDb::create();
        let port = relay_to_socket();
        let url = |params: &str| format!("postgresql://root@127.0.0.1:{port}/{}?{params}", db.name);
        let e = refused(&url("sslmode=require"));
        assert!(
            e.contains("the server does not offer TLS and the URL's sslmode requires it"),
            "{e}"
        );
        let shared = SharedDb::connect(&url("sslmode=prefer")).unwrap();
        assert!(!encrypted(&mut shared.client().unwrap()));
    }

    #[test]
    fn a_client_certificate_is_offered_when_given() {
        let db = TcpDb::create();
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed(dir.path(), "wip-client");
        let shared = SharedDb::connect(&db.url(
            "127.0.0.1",
            &format!(
                "sslmode=require&sslcert={}&sslkey={}",
                cert.display(),
                key.display()
            ),
        ))
        .unwrap();
        assert!(encrypted(&mut shared.client().unwrap()));
    }

    /// A self-signed certificate and its key (mode 0600) in `dir`, made by openssl.
    fn self_signed(dir: &std::path::Path, cn: &str) -> (PathBuf, PathBuf) {
        let (cert, key) = (dir.join(format!("{cn}.crt")), dir.join(format!("{cn}.key")));
        let out = std::process::Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .arg("-subj")
            .arg(format!("/CN={cn}"))
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        (cert, key)
    }

    /// A TCP port on 127.0.0.1 relayed to PostgreSQL's Unix socket.
    fn relay_to_socket() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for tcp in listener.incoming().map_while(Result::ok) {
                let Ok(unix) = std::os::unix::net::UnixStream::connect(format!(
                    "{}/.s.PGSQL.5432",
                    TestDb::SOCKET
                )) else {
                    continue;
                };
                let (mut t_in, mut t_out) = (tcp.try_clone().unwrap(), tcp);
                let (mut u_in, mut u_out) = (unix.try_clone().unwrap(), unix);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut t_in, &mut u_out);
                    let _ = u_out.shutdown(std::net::Shutdown::Both);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut u_in, &mut t_out);
                    let _ = t_out.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        port
    }
}
