//! The mesh secret: a key both ends read from a file, and the
//! challenge-response that proves each end holds it (so a responder
//! serves only mesh members). The client sends a nonce, the server its
//! own and HMAC-SHA256(key, "server" | client nonce | server nonce), the
//! client checks it and answers the same with "client", which the server
//! checks in constant time (`ring`) before it opens anything. The labels
//! keep one side's proof from being replayed as the other's, fresh nonces
//! an old exchange; the key never travels.

use std::path::Path;

use base64::Engine as _;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

pub const NONCE_LEN: usize = 16;
/// The shortest key accepted, in bytes (after the trailing newline is cut).
pub const MIN_KEY_LEN: usize = 16;
pub const MAX_KEY_FILE: u64 = 64 * 1024;

/// Which end a proof comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

impl Role {
    fn label(self) -> &'static [u8] {
        match self {
            Role::Client => b"ibprobe mesh v1 client",
            Role::Server => b"ibprobe mesh v1 server",
        }
    }
}

/// The mesh key. Its `Debug` never shows the key.
#[derive(Clone)]
pub struct Secret {
    key: hmac::Key,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// Reads the key from `path`: a regular file, not readable by others,
    /// of at least [`MIN_KEY_LEN`] bytes (a trailing newline is not part
    /// of the key). Errors name the file and what to do, never its bytes.
    pub fn load(path: &Path) -> Result<Secret, String> {
        let bytes = ibhost::file::read_small(path, MAX_KEY_FILE)
            .map_err(|e| format!("mesh secret: {e}"))?;
        let mode = std::fs::metadata(path)
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()))
            .unwrap_or(0);
        if mode & 0o004 != 0 {
            return Err(format!(
                "mesh secret {}: readable by every user (mode {:o}); chmod 600 it (or 640 with a group for the service)",
                path.display(),
                mode & 0o777
            ));
        }
        Secret::from_bytes(&bytes).map_err(|e| format!("mesh secret {}: {e}", path.display()))
    }

    /// The key from its bytes (a trailing `\n` or `\r\n` is cut).
    pub fn from_bytes(bytes: &[u8]) -> Result<Secret, String> {
        let mut b = bytes;
        while let [rest @ .., b'\n' | b'\r'] = b {
            b = rest;
        }
        if b.len() < MIN_KEY_LEN {
            return Err(format!(
                "the key has {} bytes, fewer than {MIN_KEY_LEN}; make one with `head -c 32 /dev/urandom | base64 > FILE`",
                b.len()
            ));
        }
        Ok(Secret {
            key: hmac::Key::new(hmac::HMAC_SHA256, b),
        })
    }

    /// A fresh random nonce, base64 (as it travels in the frames).
    pub fn nonce() -> Result<String, String> {
        let mut n = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut n)
            .map_err(|_| "the system random generator failed".to_string())?;
        Ok(b64(&n))
    }

    fn message(role: Role, client_nonce: &str, server_nonce: &str) -> Vec<u8> {
        let mut m = role.label().to_vec();
        for n in [client_nonce, server_nonce] {
            m.push(0);
            m.extend_from_slice(n.as_bytes());
        }
        m
    }

    /// `role`'s proof over both nonces, base64.
    pub fn proof(&self, role: Role, client_nonce: &str, server_nonce: &str) -> String {
        b64(hmac::sign(&self.key, &Self::message(role, client_nonce, server_nonce)).as_ref())
    }

    /// Whether `proof` is `role`'s proof over both nonces (constant time).
    pub fn verify(&self, role: Role, client_nonce: &str, server_nonce: &str, proof: &str) -> bool {
        let Ok(tag) = base64::engine::general_purpose::STANDARD.decode(proof) else {
            return false;
        };
        let message = Self::message(role, client_nonce, server_nonce);
        hmac::verify(&self.key, &message, &tag).is_ok()
    }
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}
