import pytest

from strom.security.plain import INVALID, authenticate_plain
from strom.security.scram import AuthenticationFailed

USERS = {"alice": "alice-secret"}


def test_a_known_user_with_the_right_password():
    assert authenticate_plain(b"\0alice\0alice-secret", USERS) == "alice"
    assert authenticate_plain(b"alice\0alice\0alice-secret", USERS) == "alice"  # authzid = username


@pytest.mark.parametrize(
    "token, message",
    [
        (b"\0alice\0wrong", INVALID),
        (b"\0bob\0alice-secret", INVALID),  # an unknown user reads exactly like a wrong password
        (b"\0\0pw", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (
            b"bob\0alice\0alice-secret",
            "Authentication failed: Client requested an authorization id that is different from username",
        ),
        (b"alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    ],
)
def test_refusals_carry_kafkas_messages(token, message):
    with pytest.raises(AuthenticationFailed) as info:
        authenticate_plain(token, USERS)
    assert str(info.value) == message
