"""TLS contexts from Kafka's PEM settings and the certificate principal
(ssl.principal.mapping.rules, RFC 2253 distinguished names)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trustme

from tidelog.server.security.tls import SslPrincipalMapper, distinguished_name, server_context


def _values(**kw: Any) -> Any:
    base = {"ssl.enabled.protocols": ["TLSv1.2", "TLSv1.3"], "ssl.client.auth": "none",
            "ssl.cipher.suites": []}
    base.update(kw)
    return lambda key: base.get(key)


def test_keystore_file_and_inline(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost")
    ks = tmp_path / "ks.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(ks))
    ctx = server_context(_values(**{"ssl.keystore.location": str(ks),
                                    "ssl.truststore.certificates": ca.cert_pem.bytes().decode(),
                                    "ssl.client.auth": "required"}))
    import ssl

    assert ctx.verify_mode == ssl.CERT_REQUIRED
    chain = b"".join(b.bytes() for b in cert.cert_chain_pems).decode()
    inline = server_context(_values(**{
        "ssl.keystore.certificate.chain": chain,
        "ssl.keystore.key": cert.private_key_pem.bytes().decode(),
        "ssl.enabled.protocols": ["TLSv1.3"],
    }))
    assert inline.minimum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(ValueError, match=r"ssl\.keystore"):
        server_context(_values())


def test_distinguished_name_rfc2253() -> None:
    peer = {"subject": ((("countryName", "US"),), (("organizationName", "Acme, Inc"),),
                        (("commonName", "client1"),))}
    assert distinguished_name(peer) == "CN=client1,O=Acme\\, Inc,C=US"


@pytest.mark.parametrize(
    ("rules", "dn", "name"),
    [
        ("DEFAULT", "CN=client1,O=Acme,C=US", "CN=client1,O=Acme,C=US"),
        ("RULE:^CN=(.*?),O=(.*?),C=(.*?)$/$1@$2/L,DEFAULT", "CN=Client1,O=Acme,C=US",
         "client1@acme"),
        ("RULE:^CN=(.*?),.*$/$1/U", "CN=bob,OU=x", "BOB"),
        ("RULE:^CN=nomatch$/x/,DEFAULT", "CN=bob", "CN=bob"),
    ],
)
def test_principal_mapping_rules(rules: str, dn: str, name: str) -> None:
    assert SslPrincipalMapper(rules).name(dn) == name


def test_bad_rules() -> None:
    with pytest.raises(ValueError):
        SslPrincipalMapper("RULE:broken")
    with pytest.raises(ValueError):
        SslPrincipalMapper("RULE:^CN=a$/b/").name("CN=zzz")
