import pytest

from strom.security.jaas import PLAIN_LOGIN_MODULE, parse_jaas
from strom.storage.log_config import ConfigError

KEY = "listener.name.sasl_ssl.plain.sasl.jaas.config"


def test_kafkas_plain_login_module():
    module = parse_jaas(
        KEY,
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="a \\"quoted\\" secret;=" user_bob=bare;',
    )
    assert module.class_name == PLAIN_LOGIN_MODULE and module.flag == "required"
    assert module.options["username"] == "admin"
    assert module.users() == {"admin": "admin-secret", "alice": 'a "quoted" secret;=', "bob": "bare"}


@pytest.mark.parametrize(
    "text",
    [
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="x"',  # no ';'
        "org.apache.kafka.common.security.plain.PlainLoginModule mandatory;",
        "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice;",
        "A required; B required;",
        "",
    ],
)
def test_malformed_values_name_the_key(text):
    with pytest.raises(ConfigError) as info:
        parse_jaas(KEY, text)
    assert info.value.key == KEY
