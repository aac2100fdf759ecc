//! A throwaway certificate authority for HTTPS tests: a CA certificate and a
//! server certificate for `127.0.0.1` / `localhost` it signed, as PEM files.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

/// PEM files of a fresh CA and a server certificate it issued.
#[derive(Debug, Clone)]
pub struct TestCa {
    /// The CA certificate (what `SSL_CERT_FILE` points at).
    pub ca_file: PathBuf,
    /// The server's certificate chain (leaf only).
    pub cert_file: PathBuf,
    /// The server's private key (PKCS#8).
    pub key_file: PathBuf,
}

impl TestCa {
    /// Writes `ca.pem`, `server.pem` and `server-key.pem` into `dir`.
    pub fn new(dir: &Path) -> TestCa {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "steward test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let server_params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        let server_key = KeyPair::generate().unwrap();
        let server = server_params.signed_by(&server_key, &ca).unwrap();
        let ca_file = dir.join("ca.pem");
        let cert_file = dir.join("server.pem");
        let key_file = dir.join("server-key.pem");
        std::fs::write(&ca_file, ca.pem()).unwrap();
        std::fs::write(&cert_file, server.pem()).unwrap();
        std::fs::write(&key_file, server_key.serialize_pem()).unwrap();
        TestCa {
            ca_file,
            cert_file,
            key_file,
        }
    }
}
