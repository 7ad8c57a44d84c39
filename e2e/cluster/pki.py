"""Throwaway certificates for the local cluster.

One cluster CA signs the API server's serving certificate and a client certificate per
component; a separate front-proxy CA signs the client certificate the API server uses
to reach aggregated APIs (the metrics adapter). The key pair signs service-account
tokens. Everything lives in the cluster's state directory and dies with it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=30)
_KeyPair = tuple[x509.Certificate, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey]

# Client identities, by file stem: (common name, organisations). The names are the ones
# the API server's bootstrap RBAC policy grants to each component.
CLIENTS: dict[str, tuple[str, list[str]]] = {
    "admin": ("shoal-admin", ["system:masters"]),
    "controller-manager": ("system:kube-controller-manager", []),
    "scheduler": ("system:kube-scheduler", []),
}
# The API server's identity towards kubelets (logs, exec, port-forward); in
# system:masters, as kubeadm binds its twin to system:kubelet-api-admin.
KUBELET_CLIENT = ("kube-apiserver-kubelet-client", ["system:masters"])

# The service IP of `kubernetes.default` is the first address of the service range.
SERVICE_CIDR = "10.96.0.0/16"
_KUBERNETES_SERVICE_IP = "10.96.0.1"


@dataclass(frozen=True)
class Pki:
    """Where each file of the cluster's PKI lives."""

    root: Path

    def cert(self, stem: str) -> Path:
        return self.root / f"{stem}.crt"

    def key(self, stem: str) -> Path:
        return self.root / f"{stem}.key"

    @property
    def service_account_key(self) -> Path:
        return self.root / "service-account.key"

    @property
    def service_account_pub(self) -> Path:
        return self.root / "service-account.pub"


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(
    path: Path,
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey,
    form: serialization.PrivateFormat = serialization.PrivateFormat.PKCS8,
) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, form, serialization.NoEncryption())
    )
    path.chmod(0o600)


def _name(common_name: str, organisations: list[str] | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organisations or []]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _ca(
    pki: Pki,
    stem: str,
    common_name: str,
    *,
    validity: dt.timedelta = _VALIDITY,
    dns_names: list[str] | None = None,
    rsa_pkcs1: bool = False,
) -> _KeyPair:
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048) if rsa_pkcs1 else _new_key()
    )
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )
    if dns_names:
        alt = x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names])
        builder = builder.add_extension(alt, critical=False)
    cert = builder.sign(key, hashes.SHA256())
    pki.cert(stem).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    form = (
        serialization.PrivateFormat.TraditionalOpenSSL
        if rsa_pkcs1
        else serialization.PrivateFormat.PKCS8
    )
    _write_key(pki.key(stem), key, form)
    return cert, key


def _leaf(
    pki: Pki,
    stem: str,
    subject: x509.Name,
    ca: _KeyPair,
    *,
    server_names: list[str] | None = None,
    validity: dt.timedelta = _VALIDITY,
) -> None:
    key = _new_key()
    now = dt.datetime.now(dt.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server_names else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca[0].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server_names:
        sans: list[x509.GeneralName] = []
        for name in server_names:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                sans.append(x509.DNSName(name))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca[1], hashes.SHA256())
    pki.cert(stem).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.key(stem), key)


def generate(root: Path) -> Pki:
    """Write a complete, fresh PKI under ``root`` and return its layout."""
    root.mkdir(parents=True, exist_ok=True)
    pki = Pki(root)
    ca = _ca(pki, "ca", "shoal-local-cluster-ca")
    _leaf(
        pki,
        "apiserver",
        _name("kube-apiserver"),
        ca,
        server_names=[
            "127.0.0.1",
            "localhost",
            _KUBERNETES_SERVICE_IP,
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
    )
    for stem, (common_name, orgs) in CLIENTS.items():
        _leaf(pki, stem, _name(common_name, orgs), ca)
    _leaf(pki, "apiserver-kubelet-client", _name(*KUBELET_CLIENT), ca)

    front_proxy_ca = _ca(pki, "front-proxy-ca", "shoal-local-front-proxy-ca")
    _leaf(pki, "front-proxy-client", _name("front-proxy-client"), front_proxy_ca)

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(pki.service_account_key, sa_key)
    pki.service_account_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pki


def _load_ca(pki: Pki) -> _KeyPair:
    cert = x509.load_pem_x509_certificate(pki.cert("ca").read_bytes())
    key = serialization.load_pem_private_key(pki.key("ca").read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise TypeError(f"unexpected CA key type {type(key).__name__}")
    return cert, key


def issue_client(pki: Pki, stem: str, common_name: str, organisations: list[str]) -> None:
    """A client certificate signed by the cluster CA of an existing PKI (a real node's
    components join a cluster after it started)."""
    _leaf(pki, stem, _name(common_name, organisations), _load_ca(pki))


def issue_serving(pki: Pki, stem: str, names: list[str]) -> None:
    """A serving certificate for ``names`` signed by the cluster CA of an existing PKI."""
    _leaf(pki, stem, _name(names[0]), _load_ca(pki), server_names=names)


def webhook_serving(
    directory: Path, names: list[str], ca_name: str, validity: dt.timedelta
) -> bytes:
    """A CA and a serving certificate for ``names`` (addresses or DNS names), as a
    webhook server reads them (``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key`` in
    ``directory``); returns the CA's PEM for the webhook configurations' caBundle.

    The CA is shaped for certificate rotators that adopt an existing one (Kueue's):
    it carries ``ca_name`` as a DNS name, which they verify it against, and an RSA key
    in PKCS #1, the only form they parse."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)
    ca = _ca(pki, "ca", ca_name, validity=validity, dns_names=[ca_name], rsa_pkcs1=True)
    _leaf(pki, "tls", _name(names[0]), ca, server_names=names, validity=validity)
    return pki.cert("ca").read_bytes()
