//! The bearer token of mutating requests (`server.auth_token`), compared in constant time.

use axum::http::{header, HeaderMap, StatusCode};

use super::ApiError;
use crate::daemon::Daemon;

/// Check the bearer token of a mutating request.
pub(super) fn authorize(daemon: &Daemon, headers: &HeaderMap) -> Result<(), ApiError> {
    check_token(daemon.config.server.auth_token.as_deref(), headers)
}

/// Check `headers` for the bearer token `expected` (none: changes are off).
pub(super) fn check_token(expected: Option<&str>, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(expected) = expected else {
        return Err(ApiError(
            StatusCode::FORBIDDEN,
            "mutating endpoints are off: set server.auth_token to enable them".into(),
        ));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !tokens_match(given.as_bytes(), expected.as_bytes()) {
        return Err(ApiError(
            StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token".into(),
        ));
    }
    Ok(())
}

/// Whether `given` is the token `expected`, in a time that tells neither how much of it matched
/// nor how long the token is: their SHA-256 digests (32 bytes, whatever the lengths) are
/// compared in constant time. Comparing the tokens themselves would answer a token of the
/// wrong length at once.
pub(super) fn tokens_match(given: &[u8], expected: &[u8]) -> bool {
    use subtle::ConstantTimeEq as _;
    token_digest(given).ct_eq(&token_digest(expected)).into()
}

/// The SHA-256 digest of a token: fixed length, so what is compared does not depend on it.
pub(super) fn token_digest(token: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, token).as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_compared_as_fixed_length_digests() {
        // What is compared has one length whatever the token's: nothing is decided by it.
        let short = token_digest(b"a");
        let long = token_digest(&[b'x'; 4096]);
        assert_eq!((short.len(), long.len()), (32, 32));
        assert_eq!(token_digest(b""), token_digest(b""));
        // SHA-256, as published (FIPS 180-2, "abc").
        assert_eq!(
            token_digest(b"abc")[..4],
            [0xba, 0x78, 0x16, 0xbf],
            "{:02x?}",
            token_digest(b"abc")
        );
        assert!(tokens_match(b"abc", b"abc"));
        assert!(!tokens_match(b"abc", b"abd"));
        assert!(!tokens_match(b"abc", b"abcd"));
        assert!(!tokens_match(b"", b"abc"));
        // A prefix of the token is no match either.
        let token = b"test-token-0123456789abcdef";
        assert!(!tokens_match(&token[..16], token));
    }
}
