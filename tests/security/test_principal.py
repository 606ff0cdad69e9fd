import ssl

import pytest

from strom.security.principal import DEFAULT_MAPPER, PrincipalMapper, distinguished_name
from strom.security.scram import AuthenticationFailed
from strom.storage.log_config import ConfigError
from tests.tls_certs import make_certificates

KEY = "ssl.principal.mapping.rules"


def test_a_certificates_subject_in_rfc2253_form(tmp_path):
    certificates = make_certificates(tmp_path)
    subject = ssl._ssl._test_decode_cert(str(certificates.client_cert))["subject"]
    assert distinguished_name(subject) == "CN=alice,OU=clients,O=strom-tests"
    assert DEFAULT_MAPPER.principal("CN=alice,OU=clients,O=strom-tests") == "User:CN=alice,OU=clients,O=strom-tests"


def test_special_characters_and_multi_valued_rdns_are_escaped_as_java_prints_them():
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Acme, Inc."),),
        (("commonName", "#x"), ("userId", "j+d")),
        (("emailAddress", "a@b"),),
    )
    assert distinguished_name(subject) == "1.2.840.113549.1.9.1=#1603614062,CN=\\#x+UID=j\\+d,O=Acme\\, Inc.,C=US"


def test_kafkas_documented_mapping_rules():
    mapper = PrincipalMapper.parse(
        KEY,
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    )
    assert (
        mapper.principal("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
        == "User:serviceuser"
    )
    assert mapper.principal("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "User:adminuser@admin"
    assert mapper.principal("O=x,CN=svc.1") == "User:SVC.1"
    strict = PrincipalMapper.parse(KEY, "RULE:^CN=([a-z]+),O=a$/$1/")
    with pytest.raises(AuthenticationFailed):
        strict.principal("CN=alice,O=b")


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*$/$1/", "RULE:nopattern", "DEFAULT,junk"])
def test_bad_rules_name_the_key(rules):
    with pytest.raises(ConfigError) as info:
        PrincipalMapper.parse(KEY, rules)
    assert info.value.key == KEY
