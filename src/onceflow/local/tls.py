"""The TLS files of the secure embedded broker (issue 40): a CA of its own and one broker
certificate for localhost, made with `cryptography`, written as PEM the broker reads directly
(`ssl.keystore.type=PEM`: the PKCS#8 key and the certificate chain in one file)."""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
    from cryptography.x509 import Certificate

_DAYS = 3650  # a local broker: the files live as long as its data


def write_private(path: Path, text: str) -> None:
    """`text` into `path`, readable by its owner only (0600, also when the file existed before)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def _key() -> EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem(key: EllipticCurvePrivateKey) -> str:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _cert_pem(cert: Certificate) -> str:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM).decode()


def make_ca(folder: Path, name: str = "onceflow local CA") -> tuple[Path, Path]:
    """A new CA in `folder`: ca.pem (its certificate) and ca.key (its key, 0600)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    key = _key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # keyCertSign, cRLSign
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    write_private(folder / "ca.key", _pem(key))
    (folder / "ca.pem").write_text(_cert_pem(cert))
    return folder / "ca.pem", folder / "ca.key"


def make_server_cert(ca_pem: Path, ca_key: Path, out: Path, host: str = "localhost", *more_hosts: str) -> Path:
    """A server certificate for `host` (and `more_hosts`: a served broker's advertised names) and
    127.0.0.1 signed by the CA: its PKCS#8 key, then the certificate and the CA's, in one PEM file (0600)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_cert = x509.load_pem_x509_certificate(ca_pem.read_bytes())
    signer = serialization.load_pem_private_key(ca_key.read_bytes(), password=None)
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=_DAYS))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    *(x509.DNSName(h) for h in dict.fromkeys((host, *more_hosts))),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .sign(signer, hashes.SHA256())  # type: ignore[arg-type]  # the CA's key is the EC key make_ca wrote
    )
    write_private(out, _pem(key) + _cert_pem(cert) + _cert_pem(ca_cert))
    return out
