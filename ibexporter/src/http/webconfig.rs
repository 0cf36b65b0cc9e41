//! The web config file: optional TLS and basic auth, in the format of the
//! Prometheus exporter-toolkit (`--web.config.file`), so operators can reuse
//! the file they already have for node_exporter:
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt     # PEM chain, leaf first; relative to this file
//!   key_file: server.key      # PEM private key (PKCS#8, PKCS#1 or SEC1)
//! basic_auth_users:
//!   prometheus: $2y$10$...    # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\n')
//! ```
//!
//! Only these fields are supported. Any other exporter-toolkit field
//! (`client_auth_type`, `client_ca_file`, `min_version`, `cipher_suites`,
//! `http_server_config`, ...) is refused by name rather than silently
//! ignored, because ignoring a security setting is worse than failing.
//! An empty file means plain HTTP without auth.
//!
//! YAML is parsed with `serde_norway`: `serde_yaml` is unmaintained and
//! `serde_yml` is archived with a soundness advisory (RUSTSEC-2025-0068);
//! `serde_norway` is the maintained fork with the same API.
//!
//! Certificates and the key are read once, at [`WebConfig::load`]; restart
//! the exporter after rotating them. Every file is read only if it is a
//! regular file of at most 1 MiB (`ibhost::file::read_small`), and no
//! error quotes what a file holds: a web config pointed at `/etc/shadow`
//! says where it is wrong, not what is written there.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A web config file that was wrong, as one line naming the file, the field
/// and what to do.
///
/// Why it exists: the exporter refuses to start on a bad web config, and
/// the operator must see at once which line to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebConfigError {
    /// The web config file.
    pub file: PathBuf,
    /// The offending field as a dotted path (`tls_server_config.cert_file`),
    /// or empty when the file as a whole is at fault.
    pub field: String,
    /// What was wrong and what to do about it.
    pub message: String,
}

impl fmt::Display for WebConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "web config {}: {}", self.file.display(), self.message)
        } else {
            write!(
                f,
                "web config {}: field `{}`: {}",
                self.file.display(),
                self.field,
                self.message
            )
        }
    }
}

impl std::error::Error for WebConfigError {}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename = "web config mapping")]
struct RawConfig {
    tls_server_config: Option<RawTls>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename = "tls_server_config mapping")]
struct RawTls {
    cert_file: Option<String>,
    key_file: Option<String>,
}

/// A loaded, validated web config: what the server needs for TLS and basic
/// auth.
///
/// Why it exists: [`super::serve`] takes an `Option<WebConfig>`; by the time
/// one exists, the certificate and key have been read and every password
/// hash checked, so serving cannot fail later on a config mistake.
#[derive(Clone)]
pub struct WebConfig {
    /// The file it was read from (for messages).
    pub file: PathBuf,
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
    /// User name -> bcrypt hash; empty means no authentication.
    pub(crate) users: Arc<BTreeMap<String, String>>,
}

impl fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebConfig")
            .field("file", &self.file)
            .field("tls", &self.tls.is_some())
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl WebConfig {
    /// Reads and validates the web config at `file`; relative certificate
    /// and key paths are taken relative to the file's directory.
    pub fn load(file: &Path) -> Result<WebConfig, WebConfigError> {
        let text =
            ibhost::file::read_small_text(file, ibhost::file::MAX_SMALL_FILE).map_err(|e| {
                WebConfigError {
                    file: file.to_path_buf(),
                    field: String::new(),
                    message: format!("{e}; check the path given to --web.config.file"),
                }
            })?;
        Self::parse(&text, file)
    }

    /// Validates web config `text` as if read from `file` (used for messages
    /// and to resolve relative paths).
    pub fn parse(text: &str, file: &Path) -> Result<WebConfig, WebConfigError> {
        let err = |field: &str, message: String| WebConfigError {
            file: file.to_path_buf(),
            field: field.to_string(),
            message,
        };
        let raw: RawConfig = if text.trim().is_empty() {
            RawConfig::default()
        } else {
            serde_path_to_error::deserialize(serde_norway::Deserializer::from_str(text)).map_err(
                |e| {
                    let path = e.path().to_string();
                    let field = if path == "." {
                        String::new()
                    } else if ibhost::file::looks_like_key(&path) {
                        path
                    } else {
                        "(a key that is not a web config field)".into()
                    };
                    let inner = e.into_inner();
                    let at = inner
                        .location()
                        .map(|l| format!("line {} column {}: ", l.line(), l.column()))
                        .unwrap_or_default();
                    // The YAML error may quote the file (a secret, when
                    // the path is not the file meant): keep only its kind.
                    let what = ibhost::file::without_quoted(&inner.to_string());
                    let at = if what.contains(" line ") {
                        String::new()
                    } else {
                        at
                    };
                    err(
                        &field,
                        format!(
                            "{at}{what}; supported: tls_server_config {{cert_file, key_file}} and \
                             basic_auth_users {{name: bcrypt hash}}",
                        ),
                    )
                },
            )?
        };
        let base = file.parent().unwrap_or(Path::new("."));
        let tls = match raw.tls_server_config {
            None => None,
            Some(t) => {
                let resolve = |v: Option<String>, field: &str| -> Result<PathBuf, WebConfigError> {
                    match v {
                        Some(s) if !s.trim().is_empty() => Ok(base.join(s)),
                        _ => Err(err(
                            field,
                            "missing or empty; TLS needs both cert_file and key_file (PEM), \
                             or remove tls_server_config for plain HTTP"
                                .into(),
                        )),
                    }
                };
                let cert_file = resolve(t.cert_file, "tls_server_config.cert_file")?;
                let key_file = resolve(t.key_file, "tls_server_config.key_file")?;
                Some(Arc::new(tls_config(&cert_file, &key_file, &err)?))
            }
        };
        let users = raw.basic_auth_users.unwrap_or_default();
        for (name, hash) in &users {
            let field = format!("basic_auth_users.{name}");
            if name.is_empty() || name.contains(':') {
                return Err(err(
                    &field,
                    "a user name must be non-empty and must not contain ':' (basic auth \
                     splits user and password at the first ':')"
                        .into(),
                ));
            }
            if let Err(e) = hash.parse::<bcrypt::HashParts>() {
                return Err(err(
                    &field,
                    format!(
                        "not a bcrypt hash ({e}); store the hash, not the password: \
                         htpasswd -nBC 10 \"\" | tr -d ':\\n'"
                    ),
                ));
            }
        }
        Ok(WebConfig {
            file: file.to_path_buf(),
            tls,
            users: Arc::new(users),
        })
    }

    /// Whether connections are served over TLS.
    pub fn tls_enabled(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether requests need basic auth.
    pub fn basic_auth_enabled(&self) -> bool {
        !self.users.is_empty()
    }
}

fn tls_config(
    cert_file: &Path,
    key_file: &Path,
    err: &dyn Fn(&str, String) -> WebConfigError,
) -> Result<rustls::ServerConfig, WebConfigError> {
    const CERT: &str = "tls_server_config.cert_file";
    const KEY: &str = "tls_server_config.key_file";
    let read = |path: &Path, field: &str| {
        ibhost::file::read_small(path, ibhost::file::MAX_SMALL_FILE)
            .map_err(|e| err(field, e.to_string()))
    };
    let cert_bytes = read(cert_file, CERT)?;
    // PEM errors may quote a line of the file: not shown.
    let certs = CertificateDer::pem_slice_iter(&cert_bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| {
            err(
                CERT,
                format!(
                    "{} is not a PEM certificate chain; it must hold `BEGIN CERTIFICATE` blocks, leaf first",
                    cert_file.display()
                ),
            )
        })?;
    if certs.is_empty() {
        return Err(err(
            CERT,
            format!(
                "{} holds no `BEGIN CERTIFICATE` block; it must be a PEM certificate chain, leaf first",
                cert_file.display()
            ),
        ));
    }
    let key_bytes = read(key_file, KEY)?;
    let key = PrivateKeyDer::from_pem_slice(&key_bytes).map_err(|_| {
        err(
            KEY,
            format!(
                "{} holds no usable PEM private key (PKCS#8, PKCS#1 or SEC1)",
                key_file.display()
            ),
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err("tls_server_config", format!("TLS setup failed: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            err(
                "tls_server_config",
                format!(
                    "{} and {} do not make a usable certificate and key: {e}; check that the key belongs to the certificate",
                    cert_file.display(),
                    key_file.display()
                ),
            )
        })?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<WebConfig, WebConfigError> {
        WebConfig::parse(text, Path::new("/etc/ibexporter/web.yml"))
    }

    #[test]
    fn empty_is_plain() {
        let c = parse("").unwrap();
        assert!(!c.tls_enabled() && !c.basic_auth_enabled());
    }

    #[test]
    fn users_are_checked() {
        // bcrypt("secret", cost 4)
        let h = bcrypt::hash("secret", 4).unwrap();
        let c = parse(&format!("basic_auth_users:\n  alice: '{h}'\n")).unwrap();
        assert!(c.basic_auth_enabled());
        let e = parse("basic_auth_users:\n  alice: secret\n").unwrap_err();
        assert_eq!(e.field, "basic_auth_users.alice");
        assert!(e.to_string().starts_with(
            "web config /etc/ibexporter/web.yml: field `basic_auth_users.alice`: not a bcrypt hash"
        ), "{e}");
        let e = parse(&format!("basic_auth_users:\n  'a:b': '{h}'\n")).unwrap_err();
        assert!(e.message.contains("':'"), "{e}");
    }

    #[test]
    fn unknown_and_missing_fields_are_named() {
        let e = parse("tls_server_config:\n  cert_file: a.crt\n  client_ca_file: ca.crt\n")
            .unwrap_err();
        assert_eq!(e.field, "tls_server_config.client_ca_file", "{e}");
        assert!(e.message.contains("unknown field `client_ca_file`"), "{e}");
        let e = parse("tls_server_config:\n  cert_file: a.crt\n").unwrap_err();
        assert_eq!(e.field, "tls_server_config.key_file", "{e}");
        let e = parse("http_server_config: {}\n").unwrap_err();
        assert!(e.message.contains("http_server_config"), "{e}");
        assert!(!e.to_string().contains('\n'), "{e}");
        let e = parse("basic_auth_users: [a, b]\n").unwrap_err();
        assert_eq!(e.field, "basic_auth_users", "{e}");
    }

    #[test]
    fn missing_cert_names_the_file() {
        let e =
            parse("tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n").unwrap_err();
        assert_eq!(e.field, "tls_server_config.cert_file");
        assert!(e.message.contains("/etc/ibexporter/nope.crt"), "{e}");
    }
}
