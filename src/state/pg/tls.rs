//! TLS for the shared state's PostgreSQL connections, with libpq's meaning of the URL's
//! `sslmode`, `sslrootcert`, `sslcert` and `sslkey`.
//!
//! The `postgres` crate reads only `sslmode=disable|prefer|require` and refuses the other
//! parameters, so they are taken out of the URL here, the rest goes to the crate, and the
//! crate is told only whether TLS is off, tried or required; what "required" verifies is
//! decided by the rustls verifier built here.
//!
//! The TLS stack is rustls with the ring provider, as the github host's (no aws-lc, no
//! OpenSSL), joined to the client by `tokio-postgres-rustls` 0.14: the long-standing
//! adapter (it has followed tokio-postgres since 0.5), on rustls 0.23 with the provider
//! picked by a feature and nothing else enabled, and with SCRAM channel binding
//! (`tls-server-end-point`), so a password login over TLS is bound to the server's
//! certificate. Its 0.13 refused to make a connector for a Unix-socket host (no DNS
//! name) before any TLS was used, and local mounts use the socket. `postgres_rustls` does
//! much the same; it offered nothing this needs that the other lacks.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use postgres::config::{Host, SslMode as CrateSslMode};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use rustls::{Error as TlsError, SignatureScheme};
pub use tokio_postgres_rustls::MakeRustlsConnect;

/// Why a state URL's TLS cannot be set up, in words for the operator.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("the parameter {0} is not supported (wip reads sslmode, sslrootcert, sslcert and sslkey); remove it")]
    Unsupported(String),
    #[error("{}", words(.0))]
    Url(#[source] postgres::Error),
    #[error("sslmode=allow (plaintext first, TLS if the server insists) is not supported: use prefer, require, verify-ca or verify-full, or disable")]
    AllowMode,
    #[error("sslmode={0} is not one of disable, prefer, require, verify-ca, verify-full")]
    UnknownMode(String),
    #[error("sslrootcert=system needs sslmode=verify-full (the system's roots trust certificates for any name), not sslmode={}", .0.as_str())]
    SystemNeedsVerifyFull(SslMode),
    #[error("the root certificates in {from} cannot be used: {source}")]
    UnusableRoots {
        from: String,
        source: rustls::client::VerifierBuilderError,
    },
    #[error("TLS setup: {0}")]
    Setup(#[source] TlsError),
    #[error("the client certificate and key do not go together: {0}")]
    KeyMismatch(#[source] TlsError),
    #[error("sslmode={} needs root certificates, and there is no home directory ($HOME is not set) to find ~/.postgresql/root.crt in: give sslrootcert=PATH (a PEM file) or sslrootcert=system", .0.as_str())]
    NoHome(SslMode),
    /// No system root, with what the system's stores said (may be nothing).
    #[error("sslrootcert=system: no trusted root certificates found on this system{}", in_parentheses(.0))]
    NoSystemRoots(Vec<String>),
    #[error("sslmode={}: root certificate file {} does not exist; provide the file (PEM), use the system's trusted roots with sslrootcert=system, or use sslmode=require to encrypt without verifying the server", .mode.as_str(), .path.display())]
    NoRootFile { mode: SslMode, path: PathBuf },
    #[error("root certificate file {}: {source}", .path.display())]
    RootFile {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("root certificate file {}: {source}", .path.display())]
    RootCert { path: PathBuf, source: TlsError },
    #[error("root certificate file {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", .0.display())]
    NoRootCert(PathBuf),
    #[error("client certificate file {} (sslcert) does not exist", .0.display())]
    NoCertFile(PathBuf),
    #[error("sslkey={0} without a client certificate: give sslcert=PATH too")]
    KeyWithoutCert(String),
    #[error("client certificate {} without a key: give sslkey=PATH", .0.display())]
    CertWithoutKey(PathBuf),
    #[error("client certificate file {}: {source}", .path.display())]
    CertFile {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("client certificate file {} holds no PEM certificate", .0.display())]
    NoCert(PathBuf),
    #[error("private key file {} (for {}): {source}", .key.display(), .cert.display())]
    KeyFile {
        key: PathBuf,
        cert: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("private key file {}: {source}", .path.display())]
    KeyMeta {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("private key file {} has group or world access (mode {mode:o}); it must be u=rw (0600) or less if owned by the current user, or u=rw,g=r (0640) or less if owned by root", .path.display())]
    KeyTooOpen { path: PathBuf, mode: u32 },
}

/// ` (a; b)`, or nothing for no words.
fn in_parentheses(words: &[String]) -> String {
    if words.is_empty() {
        String::new()
    } else {
        format!(" ({})", words.join("; "))
    }
}

/// libpq's `sslmode` values that wip follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plaintext only.
    Disable,
    /// Try TLS (certificate not verified), fall back to plaintext if the server has none.
    Prefer,
    /// TLS or nothing; the certificate is not verified (unless a root file exists, as libpq).
    Require,
    /// TLS, the certificate chain verified against the root certificates.
    VerifyCa,
    /// TLS, the chain and the server's host name verified.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, SetupError> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            "allow" => return Err(SetupError::AllowMode),
            other => return Err(SetupError::UnknownMode(other.to_string())),
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// Where the root certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Roots {
    /// A PEM file (`sslrootcert=PATH`, or libpq's default `~/.postgresql/root.crt`).
    File(PathBuf),
    /// The operating system's trusted roots (`sslrootcert=system`).
    System,
}

/// The TLS parameters of a URL, taken out of it.
#[derive(Debug, Default, PartialEq, Eq)]
struct Params {
    sslmode: Option<String>,
    sslrootcert: Option<String>,
    sslcert: Option<String>,
    sslkey: Option<String>,
    /// libpq parameters about TLS that wip does not follow.
    unsupported: Vec<String>,
}

/// libpq's TLS and security parameters that wip does not follow: refused by name rather
/// than ignored, since each would change what a connection trusts.
const UNSUPPORTED: [&str; 10] = [
    "sslcrl",
    "sslcrldir",
    "sslpassword",
    "sslsni",
    "sslcompression",
    "sslcertmode",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "requiressl",
    "gssencmode",
];

/// `url` without the parameters wip reads itself, and those parameters (decoded).
/// The query starts at the first `?` after the credentials, as the client crate reads it.
fn split_params(url: &str) -> (String, Params) {
    let after_at = url.find('@').map_or(0, |i| i + 1);
    let Some(q) = url[after_at..].find('?').map(|i| i + after_at) else {
        return (url.to_string(), Params::default());
    };
    let (base, query) = (&url[..q], &url[q + 1..]);
    let mut params = Params::default();
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decoded = || {
            percent_encoding::percent_decode_str(value)
                .decode_utf8_lossy()
                .into_owned()
        };
        // As libpq, the last of a repeated parameter wins.
        match key {
            "sslmode" => params.sslmode = Some(decoded()),
            "sslrootcert" => params.sslrootcert = Some(decoded()),
            "sslcert" => params.sslcert = Some(decoded()),
            "sslkey" => params.sslkey = Some(decoded()),
            k if UNSUPPORTED.contains(&k) => params.unsupported.push(k.to_string()),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, params)
}

/// The connection settings and the TLS connector for one state URL.
pub struct Prepared {
    pub config: postgres::Config,
    pub tls: MakeRustlsConnect,
    /// What the connections do, in words for messages
    /// ("sslmode=verify-full, roots from /etc/…").
    pub described: String,
}

/// Parse `url` (without `postgresql://` checks: the caller did them) and build its TLS.
/// `home` is where `~/.postgresql/` is looked for. Errors are words for the operator.
pub fn prepare(url: &str, home: Option<&Path>) -> Result<Prepared, SetupError> {
    let (rest, params) = split_params(url);
    if let Some(key) = params.unsupported.first() {
        return Err(SetupError::Unsupported(key.clone()));
    }
    let mut config: postgres::Config = rest.parse().map_err(SetupError::Url)?;
    let given = params.sslmode.as_deref().map(SslMode::parse).transpose()?;
    let system = params.sslrootcert.as_deref() == Some("system");
    // libpq: the system's roots make verify-full the default and refuse anything weaker,
    // since those roots vouch for any name they ever signed.
    let mode = match (given, system) {
        (None, true) => SslMode::VerifyFull,
        (Some(m), true) if m != SslMode::VerifyFull => {
            return Err(SetupError::SystemNeedsVerifyFull(m))
        }
        (m, _) => m.unwrap_or(SslMode::Prefer),
    };
    // libpq ignores sslmode on Unix sockets: PostgreSQL offers no TLS there, and the
    // socket's own permissions protect it.
    let hosts = config.get_hosts();
    let unix_only = !hosts.is_empty()
        && config.get_hostaddrs().is_empty()
        && hosts.iter().all(|h| matches!(h, Host::Unix(_)));
    let dot_pg = home.map(|h| h.join(".postgresql"));
    if mode == SslMode::Disable || unix_only {
        config.ssl_mode(CrateSslMode::Disable);
        let why = if unix_only && mode != SslMode::Disable {
            format!(
                "sslmode={} does not apply over a Unix socket (no TLS there)",
                mode.as_str()
            )
        } else {
            "sslmode=disable".to_string()
        };
        return Ok(Prepared {
            config,
            tls: MakeRustlsConnect::new(unverified_config(None)?),
            described: why,
        });
    }
    let roots = match params.sslrootcert.as_deref() {
        Some("system") => Some(Roots::System),
        Some(path) => Some(Roots::File(PathBuf::from(path))),
        None => dot_pg.as_ref().map(|d| Roots::File(d.join("root.crt"))),
    };
    // libpq: under require, a root certificate file that exists makes it verify-ca.
    let explicit_roots = params.sslrootcert.is_some();
    let mode = match (mode, &roots) {
        (SslMode::Require, Some(Roots::File(p))) if explicit_roots || p.exists() => {
            SslMode::VerifyCa
        }
        (m, _) => m,
    };
    let client_auth = client_cert(&params, dot_pg.as_deref())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (tls_config, described) = match mode {
        SslMode::Prefer | SslMode::Require => (
            unverified_config(client_auth)?,
            format!(
                "sslmode={} (encrypted, the certificate not verified)",
                mode.as_str()
            ),
        ),
        SslMode::VerifyCa | SslMode::VerifyFull => {
            let (store, from) = load_roots(roots.as_ref(), mode)?;
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(store), Arc::clone(&provider))
                    .build()
                    .map_err(|source| SetupError::UnusableRoots {
                        from: from.clone(),
                        source,
                    })?;
            let verifier: Arc<dyn ServerCertVerifier> = if mode == SslMode::VerifyCa {
                Arc::new(ChainOnly(webpki))
            } else {
                webpki
            };
            let given_mode = given.unwrap_or(mode);
            let note = if given_mode != mode {
                format!(
                    " (as verify-ca: sslmode={} verifies when a root certificate file exists)",
                    given_mode.as_str()
                )
            } else {
                String::new()
            };
            (
                finish(
                    builder(&provider)?.with_custom_certificate_verifier(verifier),
                    client_auth,
                )?,
                format!("sslmode={}{note}, roots from {from}", mode.as_str()),
            )
        }
        SslMode::Disable => unreachable!("handled above"),
    };
    config.ssl_mode(if mode == SslMode::Prefer {
        CrateSslMode::Prefer
    } else {
        CrateSslMode::Require
    });
    Ok(Prepared {
        config,
        tls: MakeRustlsConnect::new(tls_config),
        described,
    })
}

type ClientAuth = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn builder(
    provider: &Arc<CryptoProvider>,
) -> Result<rustls::client::danger::DangerousClientConfigBuilder, SetupError> {
    Ok(ClientConfig::builder_with_provider(Arc::clone(provider))
        .with_safe_default_protocol_versions()
        .map_err(SetupError::Setup)?
        .dangerous())
}

fn finish(
    builder: rustls::ConfigBuilder<ClientConfig, rustls::client::WantsClientCert>,
    auth: Option<ClientAuth>,
) -> Result<ClientConfig, SetupError> {
    match auth {
        None => Ok(builder.with_no_client_auth()),
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(SetupError::KeyMismatch),
    }
}

/// Encryption without verification of the certificate (prefer, require).
fn unverified_config(auth: Option<ClientAuth>) -> Result<ClientConfig, SetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(AnyCertificate(Arc::clone(&provider)));
    finish(
        builder(&provider)?.with_custom_certificate_verifier(verifier),
        auth,
    )
}

/// The root certificates to verify with, and where they came from (for messages).
fn load_roots(roots: Option<&Roots>, mode: SslMode) -> Result<(RootCertStore, String), SetupError> {
    let mut store = RootCertStore::empty();
    match roots {
        None => Err(SetupError::NoHome(mode)),
        Some(Roots::System) => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found.errors.iter().map(|e| e.to_string()).collect();
                return Err(SetupError::NoSystemRoots(why));
            }
            Ok((store, "the system's trusted roots".to_string()))
        }
        Some(Roots::File(path)) => {
            let shown = path.display();
            if !path.exists() {
                return Err(SetupError::NoRootFile {
                    mode,
                    path: path.clone(),
                });
            }
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|source| SetupError::RootFile {
                    path: path.clone(),
                    source,
                })?;
            if certs.is_empty() {
                return Err(SetupError::NoRootCert(path.clone()));
            }
            for cert in certs {
                store.add(cert).map_err(|source| SetupError::RootCert {
                    path: path.clone(),
                    source,
                })?;
            }
            Ok((store, shown.to_string()))
        }
    }
}

/// The client certificate and key: `sslcert`/`sslkey`, else libpq's defaults
/// `~/.postgresql/postgresql.crt` and `.key` when the certificate exists.
fn client_cert(params: &Params, dot_pg: Option<&Path>) -> Result<Option<ClientAuth>, SetupError> {
    let cert_path = match (&params.sslcert, dot_pg) {
        (Some(p), _) => {
            let p = PathBuf::from(p);
            // libpq skips a missing certificate silently; a path given on purpose that
            // is not there is a mistake worth naming.
            if !p.exists() {
                return Err(SetupError::NoCertFile(p));
            }
            p
        }
        (None, Some(d)) if d.join("postgresql.crt").exists() => d.join("postgresql.crt"),
        _ => {
            if let Some(k) = &params.sslkey {
                return Err(SetupError::KeyWithoutCert(k.clone()));
            }
            return Ok(None);
        }
    };
    let key_path = match (&params.sslkey, dot_pg) {
        (Some(k), _) => PathBuf::from(k),
        (None, Some(d)) => d.join("postgresql.key"),
        (None, None) => return Err(SetupError::CertWithoutKey(cert_path)),
    };
    let chain = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|source| SetupError::CertFile {
            path: cert_path.clone(),
            source,
        })?;
    if chain.is_empty() {
        return Err(SetupError::NoCert(cert_path));
    }
    key_permissions(&key_path)?;
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|source| SetupError::KeyFile {
        key: key_path.clone(),
        cert: cert_path.clone(),
        source,
    })?;
    Ok(Some((chain, key)))
}

/// libpq's rule: a private key readable by others is refused.
fn key_permissions(path: &Path) -> Result<(), SetupError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|source| SetupError::KeyMeta {
        path: path.to_path_buf(),
        source,
    })?;
    let mode = meta.mode() & 0o777;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let too_open = if meta.uid() == me {
        mode & 0o077 != 0
    } else {
        meta.uid() == 0 && mode & 0o037 != 0
    };
    if too_open {
        return Err(SetupError::KeyTooOpen {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// `require`'s verifier: any certificate, as libpq, but the handshake's signatures are
/// still checked against the certificate's key, so the session is with whoever holds it.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`'s verifier: webpki's, less the host name. webpki checks the chain before
/// the name, so a name mismatch means the chain was good.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(TlsError::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// A connection error that is about TLS, in words an operator can act on; None for any
/// other error.
pub fn explain(e: &postgres::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut tls_failed = false;
    while let Some(err) = source {
        // io::Error's source() skips the error it wraps, so look inside it by hand.
        let inner = err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|i| i.downcast_ref::<TlsError>());
        if let Some(t) = err.downcast_ref::<TlsError>().or(inner) {
            return Some(explain_rustls(t));
        }
        let text = err.to_string();
        if text == "server does not support TLS" {
            return Some(
                "the server does not offer TLS and the URL's sslmode requires it; \
                 turn on ssl in the server's postgresql.conf, or use sslmode=prefer or \
                 disable to allow plaintext"
                    .into(),
            );
        }
        if text == "no hostname provided for TLS handshake" {
            return Some(
                "TLS needs a host name to check the certificate against: give host=NAME \
                 (with hostaddr=IP to choose the address)"
                    .into(),
            );
        }
        tls_failed |= text.starts_with("error performing TLS handshake");
        source = err.source();
    }
    tls_failed.then(|| format!("the TLS handshake failed: {e}"))
}

/// webpki's `DnsName("db.example")` / `IpAddress(10.0.0.7)` as the name alone.
fn plain_name(presented: &str) -> &str {
    presented
        .split_once('(')
        .and_then(|(_, inner)| inner.strip_suffix(')'))
        .map_or(presented, |inner| inner.trim_matches('"'))
}

/// A postgres error with its cause, which the crate's Display leaves out for server
/// errors ("db error") and connection strings ("invalid connection string").
pub fn words(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} {}: {}", db.severity(), db.code().code(), db.message());
    }
    let text = e.to_string();
    match std::error::Error::source(e) {
        Some(cause) if !text.contains(&cause.to_string()) => format!("{text}: {cause}"),
        _ => text,
    }
}

fn explain_rustls(e: &TlsError) -> String {
    match e {
        TlsError::InvalidCertificate(c) => {
            let what = match c {
                CertificateError::NotValidForNameContext {
                    expected,
                    presented,
                } => format!(
                    "it is not valid for the host name {} (it names {}): connect by one of \
                     those names (host=NAME, with hostaddr=IP to choose the address), or use \
                     sslmode=verify-ca to check only the chain",
                    expected.to_str(),
                    if presented.is_empty() {
                        "no name in subjectAltName".to_string()
                    } else {
                        presented
                            .iter()
                            .map(|n| plain_name(n))
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ),
                CertificateError::NotValidForName => {
                    "it is not valid for the host name connected to (sslmode=verify-ca \
                     checks only the chain)"
                        .into()
                }
                CertificateError::UnknownIssuer => {
                    "it is not signed by any of the root certificates (sslrootcert) given".into()
                }
                other => other.to_string(),
            };
            format!("the server's certificate failed verification: {what}")
        }
        other => format!("the TLS handshake failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::pg::SNAKEOIL;

    #[test]
    fn tls_parameters_leave_the_url_and_the_rest_stays_in_order() {
        let (rest, p) = split_params(
            "postgresql://u:p%3Fw@h:5432/db?connect_timeout=2&sslmode=verify-full\
             &sslrootcert=%2Fetc%2Fca.pem&application_name=x&sslcert=/c&sslkey=/k",
        );
        assert_eq!(
            rest,
            "postgresql://u:p%3Fw@h:5432/db?connect_timeout=2&application_name=x"
        );
        assert_eq!(
            p,
            Params {
                sslmode: Some("verify-full".into()),
                sslrootcert: Some("/etc/ca.pem".into()),
                sslcert: Some("/c".into()),
                sslkey: Some("/k".into()),
                unsupported: vec![],
            }
        );
        let (rest, p) = split_params("postgresql://h/db?sslmode=require");
        assert_eq!(rest, "postgresql://h/db");
        assert_eq!(p.sslmode.as_deref(), Some("require"));
        // A '?' in the password is the password's.
        let (rest, p) = split_params("postgresql://u:a?b@h/db");
        assert_eq!(rest, "postgresql://u:a?b@h/db");
        assert_eq!(p, Params::default());
    }

    fn err(url: &str, home: Option<&Path>) -> String {
        match prepare(url, home) {
            Ok(p) => panic!("{url} was accepted: {}", p.described),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn modes_follow_libpq() {
        let home = tempfile::tempdir().unwrap();
        let h = Some(home.path());
        let p = prepare("postgresql://u@db.example/wip", h).unwrap();
        assert_eq!(p.config.get_ssl_mode(), CrateSslMode::Prefer);
        let p = prepare("postgresql://u@db.example/wip?sslmode=require", h).unwrap();
        assert_eq!(p.config.get_ssl_mode(), CrateSslMode::Require);
        assert!(p.described.contains("not verified"), "{}", p.described);
        let p = prepare("postgresql://u@db.example/wip?sslmode=disable", h).unwrap();
        assert_eq!(p.config.get_ssl_mode(), CrateSslMode::Disable);
        // Unix sockets have no TLS: any sslmode works there, as with libpq.
        let p = prepare(
            "postgresql:///wip?host=/var/run/postgresql&sslmode=verify-full",
            h,
        )
        .unwrap();
        assert_eq!(p.config.get_ssl_mode(), CrateSslMode::Disable);

        assert!(err("postgresql://h/db?sslmode=bogus", h).contains("sslmode=bogus is not one of"));
        assert!(err("postgresql://h/db?sslmode=allow", h).contains("not supported"));
        // The crate still refuses what nobody reads, with its words.
        let e = err("postgresql://h/db?sslcrl=/x", h);
        assert!(e.contains("the parameter sslcrl is not supported"), "{e}");
        let e = err("postgresql://h/db?nonsense=1", h);
        assert!(e.contains("unknown option `nonsense`"), "{e}");
        assert_eq!(plain_name("DnsName(\"db.example\")"), "db.example");
        assert_eq!(plain_name("IpAddress(10.0.0.7)"), "10.0.0.7");
        // system roots: verify-full by default, anything weaker refused.
        assert!(
            err("postgresql://h/db?sslrootcert=system&sslmode=verify-ca", h)
                .contains("sslrootcert=system needs sslmode=verify-full")
        );
    }

    #[test]
    fn verification_without_roots_says_where_it_looked() {
        let home = tempfile::tempdir().unwrap();
        let h = Some(home.path());
        let e = err("postgresql://h/db?sslmode=verify-ca", h);
        let default = home.path().join(".postgresql/root.crt");
        assert!(
            e.contains(&format!(
                "root certificate file {} does not exist",
                default.display()
            )),
            "{e}"
        );
        let e = err("postgresql://h/db?sslmode=verify-full", None);
        assert!(e.contains("$HOME is not set"), "{e}");
        let e = err(
            "postgresql://h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
            h,
        );
        assert!(
            e.contains("root certificate file /nonexistent/ca.pem does not exist"),
            "{e}"
        );
        let empty = home.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = err(
            &format!(
                "postgresql://h/db?sslmode=verify-full&sslrootcert={}",
                empty.display()
            ),
            h,
        );
        assert!(e.contains("holds no PEM certificate"), "{e}");
    }

    #[test]
    fn require_verifies_the_chain_when_a_root_file_exists() {
        let home = tempfile::tempdir().unwrap();
        let dot = home.path().join(".postgresql");
        std::fs::create_dir(&dot).unwrap();
        std::fs::copy(SNAKEOIL, dot.join("root.crt")).unwrap();
        let p = prepare(
            "postgresql://u@db.example/wip?sslmode=require",
            Some(home.path()),
        )
        .unwrap();
        assert!(
            p.described.starts_with("sslmode=verify-ca"),
            "{}",
            p.described
        );
        // prefer stays unverified.
        let p = prepare("postgresql://u@db.example/wip", Some(home.path())).unwrap();
        assert!(p.described.contains("not verified"), "{}", p.described);
    }

    #[test]
    fn client_certificates_are_checked_before_connecting() {
        let home = tempfile::tempdir().unwrap();
        let h = Some(home.path());
        let e = err(
            "postgresql://h/db?sslmode=require&sslcert=/nonexistent.crt",
            h,
        );
        assert!(
            e.contains("client certificate file /nonexistent.crt"),
            "{e}"
        );
        let e = err("postgresql://h/db?sslmode=require&sslkey=/k", h);
        assert!(e.contains("without a client certificate"), "{e}");
        // A key others may read is refused, as libpq does.
        let key = home.path().join("client.key");
        std::fs::write(&key, "x").unwrap();
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        let e = err(
            &format!(
                "postgresql://h/db?sslmode=require&sslcert={SNAKEOIL}&sslkey={}",
                key.display()
            ),
            h,
        );
        assert!(e.contains("has group or world access"), "{e}");
    }
}
