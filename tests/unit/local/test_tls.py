"""The secure broker's TLS files: a CA, and a localhost certificate it signed, as the broker reads them."""

from __future__ import annotations

import ssl
import stat

from cryptography import x509

from onceflow.local.tls import make_ca, make_server_cert, write_private


def test_the_broker_certificate_is_signed_by_the_ca_for_localhost_and_loads_as_one_pem(tmp_path):
    ca_pem, ca_key = make_ca(tmp_path)
    pem_path = make_server_cert(ca_pem, ca_key, tmp_path / "broker.pem")
    assert stat.S_IMODE(ca_key.stat().st_mode) == stat.S_IMODE(pem_path.stat().st_mode) == 0o600
    pem = pem_path.read_bytes()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----") and pem.count(b"BEGIN CERTIFICATE") == 2
    cert, chained_ca = x509.load_pem_x509_certificates(pem[pem.index(b"-----BEGIN CERTIFICATE") :])
    ca = x509.load_pem_x509_certificate(ca_pem.read_bytes())
    assert chained_ca == ca and ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    cert.verify_directly_issued_by(ca)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(pem_path)  # key and chain from the one file, as Kafka's PEM keystore reads it


def test_a_private_file_stays_private_when_rewritten(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("was public")
    path.chmod(0o644)
    write_private(path, "secret=1\n")
    assert path.read_text() == "secret=1\n" and stat.S_IMODE(path.stat().st_mode) == 0o600
